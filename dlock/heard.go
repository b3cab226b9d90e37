package dlock

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// Lost must close before ZooKeeper can hand the lock to anyone else. The server expires a session
// when it has heard nothing from it for the negotiated timeout, counted from the moment a request
// of the session reached it. The client cannot see that moment, but it has a lower bound: when the
// reply to a request arrives, the server received that request after the client sent it. So the
// session lives at least until (send time of the latest request the server answered) + (the
// negotiated timeout), and that is what dlock reasons from. go-zookeeper's own state changes come
// too late for it: it notices silence only after two thirds of the timeout without a byte, and
// reports nothing at all while replies merely stop coming.
//
// heardConn wraps each connection go-zookeeper opens and reads the ZooKeeper framing as it passes,
// without changing a byte: it notes when each request was sent, and for each reply reports that
// send time; from the connect response it takes the negotiated session timeout.
type heardConn struct {
	net.Conn
	clock func() time.Duration // monotonic time of the client
	// heard reports the send time of a request the server has answered; negotiated reports the
	// session timeout a connect response granted, with the send time of its connect request
	// (zero timeout: the server refused the session).
	heard      func(sentAt time.Duration)
	negotiated func(timeout time.Duration, sentAt time.Duration)

	mu          sync.Mutex
	requestSeen bool                      // the connect request has been written
	handshake   time.Duration             // when it was
	greeted     bool                      // the connect response has been read
	pending     map[int32][]time.Duration // send times of requests not answered yet, by xid
	out, in     frameScanner
}

func newHeardConn(c net.Conn, clock func() time.Duration, heard func(time.Duration), negotiated func(time.Duration, time.Duration)) *heardConn {
	return &heardConn{Conn: c, clock: clock, heard: heard, negotiated: negotiated, pending: map[int32][]time.Duration{}}
}

// xidWatchEvent marks a watch notification: the server sends it with no request behind it.
const xidWatchEvent = -1

func (h *heardConn) Write(p []byte) (int, error) {
	// Noted before the bytes leave: the server cannot have them any earlier.
	now := h.clock()
	h.mu.Lock()
	h.out.feed(p, func(body []byte) {
		if !h.requestSeen {
			h.requestSeen = true
			h.handshake = now
			return
		}
		if len(body) >= 4 {
			xid := int32(binary.BigEndian.Uint32(body))
			h.pending[xid] = append(h.pending[xid], now)
		}
	})
	h.mu.Unlock()
	return h.Conn.Write(p)
}

func (h *heardConn) Read(p []byte) (int, error) {
	n, err := h.Conn.Read(p)
	if n > 0 {
		var heardAt []time.Duration
		var timeout time.Duration
		var greeting bool
		var handshake time.Duration
		h.mu.Lock()
		h.in.feed(p[:n], func(body []byte) {
			if !h.greeted {
				// connect response: protocolVersion int32, timeOut int32 (ms), sessionId int64, ...
				h.greeted, greeting, handshake = true, true, h.handshake
				if len(body) >= 16 && binary.BigEndian.Uint64(body[8:16]) != 0 {
					timeout = time.Duration(int32(binary.BigEndian.Uint32(body[4:8]))) * time.Millisecond
				}
				return
			}
			if len(body) < 4 {
				return
			}
			xid := int32(binary.BigEndian.Uint32(body))
			if xid == xidWatchEvent {
				return
			}
			if sent := h.pending[xid]; len(sent) > 0 {
				heardAt = append(heardAt, sent[0])
				if len(sent) == 1 {
					delete(h.pending, xid)
				} else {
					h.pending[xid] = sent[1:]
				}
			}
		})
		h.mu.Unlock()
		if greeting {
			h.negotiated(timeout, handshake)
		}
		for _, at := range heardAt {
			h.heard(at)
		}
	}
	return n, err
}

// frameScanner follows ZooKeeper's framing (a 4-byte big-endian length, then the body) through
// arbitrary chunks, and hands over the first bytes of each body: enough for xid and the header.
type frameScanner struct {
	head [4 + frameHeadLen]byte
	have int // bytes of head filled for the current frame
	skip int // body bytes of the current frame still to pass over
}

const frameHeadLen = 16

func (s *frameScanner) feed(p []byte, frame func(body []byte)) {
	for len(p) > 0 {
		if s.skip > 0 {
			k := min(s.skip, len(p))
			s.skip -= k
			p = p[k:]
			continue
		}
		want := 4
		if s.have >= 4 {
			want = 4 + min(int(binary.BigEndian.Uint32(s.head[:4])), frameHeadLen)
		}
		k := min(want-s.have, len(p))
		copy(s.head[s.have:], p[:k])
		s.have += k
		p = p[k:]
		if s.have < 4 {
			continue
		}
		size := int(binary.BigEndian.Uint32(s.head[:4]))
		want = 4 + min(size, frameHeadLen)
		if s.have < want {
			continue
		}
		frame(s.head[4:want])
		s.skip = size - (want - 4)
		s.have = 0
	}
}
