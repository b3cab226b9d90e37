package dlock

import (
	"bufio"
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// Lost must close before ZooKeeper can hand the lock to anyone else: before the leader expires the
// session. The leader expires a session T (the negotiated timeout) after it last touched it, and
// which touches reach the leader depends on the server the client talks to.
//
// The leader itself (and a standalone server) touches a session when a request of it arrives. A
// follower answers pings and reads on its own, notes the sessions they touched, and hands that
// list to the leader only in its answer to the leader's next ping, which the leader sends each
// follower every half tick (Leader.lead, Learner.ping, LearnerHandler's PING case in ZooKeeper
// 3.8). A follower cut off from its leader goes on answering for up to syncLimit × tickTime,
// while the leader hears nothing of the session. So an answer alone proves nothing.
//
// What does is an answer that only the leader could have given, and the order of the bytes on the
// follower's link to it. Call a request a proof when its success needs the leader: sync, and the
// writes (create, delete, setData), which the follower forwards on the same link as its ping
// answers. Let a request k be sent at s_k and answered at c_k, and a proof j be sent at s_j ≥ c_k +
// G, on the same connection, and answered. Then:
//
//  1. The follower touched the session at r_k, s_k ≤ r_k ≤ c_k: before it answered k.
//  2. It forwarded j to the leader at f_j ≥ s_j ≥ r_k + G. One connection is one follower that was
//     following one leader all along: a follower that stops following closes its clients'
//     connections (Learner.shutdown).
//  3. The leader pings every half tick, and G is half a tick plus the time a ping takes to reach
//     the follower and be answered (proofGap). So between r_k and f_j the follower answered a
//     ping sent after r_k, with k's session in it, and wrote that answer before it forwarded j.
//  4. The leader reads a follower's link in order and applies the touches of a ping answer as it
//     reads it, before it reads the next packet; so it touched the session before it handled j.
//  5. j succeeded. A write fails on a session the leader is expiring, and a session that is not
//     expiring takes every touch. A sync is not checked so, but the leader answers it only after
//     every proposal it made before, so if the leader had proposed to close the session, the
//     follower applies the close, and so closes the client's connection, before it answers.
//  6. So the leader touched the session at some time after r_k ≥ s_k, and cannot expire it before
//     s_k + T, on its clock.
//
// One interleaving escapes step 5: a sync that reaches the leader in the instant between its
// marking the session as expiring and proposing the close. For it to matter, the touch of step 4
// must have come too late as well, which takes a follower-to-leader link that held its bytes
// back for about T and then let them through at that instant. The fencing token covers it.
//
// With the leader or a standalone server the same holds more simply (every request touches the
// session as it arrives). A connect response is a proof of its own send time: the server asks
// the leader to revalidate the session (or to create it), and the leader touches it then.
// dlock therefore trusts a session until S + T − T/10, where S is the largest s_k proved so. That
// rests on step 3 (a link between servers delivers within G − tickTime/2, or not at all) and on
// clocks that run at about the same rate (the T/10), and on nothing else about the servers. A
// proof costs nothing while locks are taken and released (those are writes); otherwise the
// client sends a sync every proofInterval (keepProving).
//
// heardConn wraps each connection go-zookeeper opens and reads the ZooKeeper framing as it passes,
// without changing a byte: it notes when each request was sent and whether it is a proof, pairs
// every reply with its request, and reports each S it can prove; from the connect response it
// takes the negotiated session timeout. It also reports the path of each create it sees go out,
// so that a lock can send its queue read right behind its create (see readBehind). That report
// plays no part in the proofs: a read sent behind a write is one more request answered, paired
// with its own send time like any other.
//
// It also buffers what it reads. go-zookeeper reads each reply in two reads, its length and then
// its body, and each would be a system call of its own; from the buffer, one read of the socket
// usually brings the whole reply, and a pipelined create's reply brings the queue read's behind
// it. Bytes are noted as they come off the socket, which is no earlier than the server sent them.
type heardConn struct {
	net.Conn
	watch    liveness
	buffered *bufio.Reader // over socketReader; go-zookeeper reads from one goroutine at a time

	mu          sync.Mutex
	requestSeen bool                    // the connect request has been written
	handshake   time.Duration           // when it was
	greeted     bool                    // the connect response has been read
	pending     map[int32][]sentRequest // requests not answered yet, by xid
	answered    answerLog
	out, in     frameScanner
}

// liveness is what heardConn reports to (the Client), and the clock it notes times on.
type liveness interface {
	now() time.Duration // the client's monotonic clock
	// proofGap is G: how long before a proof was sent another request must have been answered for
	// the proof to cover it (see above).
	proofGap() time.Duration
	// negotiated takes the session timeout a connect response granted (zero: the server refused).
	negotiated(timeout time.Duration)
	// proved reports that the leader touched the session no earlier than at, on the client's clock.
	proved(at time.Duration)
	// proofSent reports that a proof went out at at, so that no sync need be sent for a while.
	proofSent(at time.Duration)
	// createSent reports that a create request for path was handed to the connection: whatever
	// go-zookeeper sends from now on goes out behind it (its send loop writes one request at a
	// time, in the order they were queued).
	createSent(path string)
}

type sentRequest struct {
	at    time.Duration
	proof bool
}

func newHeardConn(c net.Conn, watch liveness) *heardConn {
	h := &heardConn{Conn: c, watch: watch, pending: map[int32][]sentRequest{},
		out: frameScanner{limit: requestHeadLen}}
	h.buffered = bufio.NewReaderSize(socketReader{h}, readBufferSize)
	return h
}

// readBufferSize holds a few replies of a lock's traffic; a larger reply is read in parts, or
// straight into go-zookeeper's buffer.
const readBufferSize = 16 << 10

// requestHeadLen is how much of each request body heardConn reads: the request header (xid,
// opcode) and, for a create, the path's length and the path, if it is no longer than
// maxPipelinedPath. A longer path is simply not reported, and its lock reads its queue after
// the create's reply, one round trip later.
const (
	maxPipelinedPath = 1024
	requestHeadLen   = 8 + 4 + maxPipelinedPath
)

// xidWatchEvent marks a watch notification: the server sends it with no request behind it.
const xidWatchEvent = -1

// ZooKeeper opcodes that succeed only through the leader. Multi is left out: whether its reply
// header carries a failed operation's error is not worth relying on, and dlock takes locks with
// plain creates.
const (
	opCreate          = 1
	opDelete          = 2
	opSetData         = 5
	opSync            = 9
	opCreate2         = 15
	opCreateContainer = 19
	opCreateTTL       = 21
)

func isProof(opcode int32) bool {
	switch opcode {
	case opCreate, opDelete, opSetData, opSync, opCreate2, opCreateContainer, opCreateTTL:
		return true
	}
	return false
}

func (h *heardConn) Write(p []byte) (int, error) {
	// Noted before the bytes leave: the server cannot have them any earlier.
	now := h.watch.now()
	proofSent := false
	var created []string
	h.mu.Lock()
	h.out.feed(p, func(body []byte) {
		if !h.requestSeen {
			h.requestSeen = true
			h.handshake = now
			return
		}
		if len(body) >= 8 {
			xid := int32(binary.BigEndian.Uint32(body))
			opcode := int32(binary.BigEndian.Uint32(body[4:]))
			proof := isProof(opcode)
			proofSent = proofSent || proof
			h.pending[xid] = append(h.pending[xid], sentRequest{now, proof})
			if path, ok := createPath(opcode, body); ok {
				created = append(created, path)
			}
		}
	})
	h.mu.Unlock()
	if proofSent {
		h.watch.proofSent(now)
	}
	n, err := h.Conn.Write(p)
	if err == nil {
		// Reported once the bytes are out, although go-zookeeper's single send loop would keep
		// the order anyway: a request queued now cannot be written before this one.
		for _, path := range created {
			h.watch.createSent(path)
		}
	}
	return n, err
}

// createPath is the path of a create request (create and create2 both start with it), if the
// body's head holds all of it.
func createPath(opcode int32, body []byte) (string, bool) {
	if (opcode != opCreate && opcode != opCreate2) || len(body) < 12 {
		return "", false
	}
	n := int(int32(binary.BigEndian.Uint32(body[8:12])))
	if n < 0 || 12+n > len(body) {
		return "", false
	}
	return string(body[12 : 12+n]), true
}

func (h *heardConn) Read(p []byte) (int, error) { return h.buffered.Read(p) }

// socketReader is what the buffer reads through: the socket, and the framing heard from it.
type socketReader struct{ h *heardConn }

func (s socketReader) Read(p []byte) (int, error) { return s.h.readSocket(p) }

func (h *heardConn) readSocket(p []byte) (int, error) {
	n, err := h.Conn.Read(p)
	if n == 0 {
		return n, err
	}
	// Noted after the bytes arrived: later than the server answered, which only makes a proof
	// harder to earn.
	now := h.watch.now()
	gap := h.watch.proofGap()
	var (
		timeout  time.Duration
		greeting bool
		proved   time.Duration
		isProved bool
	)
	h.mu.Lock()
	h.in.feed(p[:n], func(body []byte) {
		if !h.greeted {
			// connect response: protocolVersion int32, timeOut int32 (ms), sessionId int64, ...
			h.greeted, greeting = true, true
			if len(body) >= 16 && binary.BigEndian.Uint64(body[8:16]) != 0 {
				timeout = time.Duration(int32(binary.BigEndian.Uint32(body[4:8]))) * time.Millisecond
				h.answered.add(now, h.handshake, gap)
				proved, isProved = h.handshake, true
			}
			return
		}
		if len(body) < 4 {
			return
		}
		// reply header: xid int32, zxid int64, err int32
		xid := int32(binary.BigEndian.Uint32(body))
		if xid == xidWatchEvent {
			return
		}
		sent := h.pending[xid]
		if len(sent) == 0 {
			return
		}
		req := sent[0]
		if len(sent) == 1 {
			delete(h.pending, xid)
		} else {
			h.pending[xid] = sent[1:]
		}
		h.answered.add(now, req.at, gap)
		if req.proof && len(body) >= 16 && binary.BigEndian.Uint32(body[12:16]) == 0 {
			if s, ok := h.answered.provedBy(req.at - gap); ok && (!isProved || s > proved) {
				proved, isProved = s, true
			}
		}
	})
	h.mu.Unlock()
	if greeting {
		h.watch.negotiated(timeout)
	}
	if isProved {
		h.watch.proved(proved)
	}
	return n, err
}

// answerLog keeps the requests answered on one connection as (answer time, send time) pairs, in
// the order the answers came, with each send time raised to the largest so far (ZooKeeper answers
// a session's requests in order anyway). To stay small it keeps one pair per slice of time a
// sixteenth of G long, the latest one; a query then may find a pair up to that much older than
// the best, never a newer one. Pairs older than the last query are dropped.
type answerLog struct {
	pairs []answerPair
}

type answerPair struct{ answeredAt, sentAt time.Duration }

// maxAnswerPairs bounds the log for a connection whose proofs stop coming (a follower cut off
// goes on answering pings); dropping the oldest pairs only makes proofs cover less.
const maxAnswerPairs = 1024

func (l *answerLog) add(answeredAt, sentAt, gap time.Duration) {
	if n := len(l.pairs); n > 0 {
		last := l.pairs[n-1]
		sentAt = max(sentAt, last.sentAt)
		if slice := max(gap/16, time.Millisecond); answeredAt/slice == last.answeredAt/slice {
			l.pairs[n-1] = answerPair{answeredAt, sentAt}
			return
		}
	}
	if len(l.pairs) == maxAnswerPairs {
		l.pairs = append(l.pairs[:0], l.pairs[maxAnswerPairs/2:]...)
	}
	l.pairs = append(l.pairs, answerPair{answeredAt, sentAt})
}

// provedBy is the latest send time among requests answered no later than by.
func (l *answerLog) provedBy(by time.Duration) (time.Duration, bool) {
	i := 0
	for i < len(l.pairs) && l.pairs[i].answeredAt <= by {
		i++
	}
	if i == 0 {
		return 0, false
	}
	s := l.pairs[i-1].sentAt
	// Later proofs are sent later and ask about later times: the pairs before this one are of no
	// more use.
	l.pairs = append(l.pairs[:0], l.pairs[i-1:]...)
	return s, true
}

// frameScanner follows ZooKeeper's framing (a 4-byte big-endian length, then the body) through
// arbitrary chunks, and hands over the first bytes of each body: enough for xid and the header
// (frameHeadLen), or as many as limit says.
type frameScanner struct {
	limit int    // body bytes handed over per frame; frameHeadLen when zero
	head  []byte // the length, then the body's first bytes
	have  int    // bytes of head filled for the current frame
	skip  int    // body bytes of the current frame still to pass over
}

const frameHeadLen = 16

func (s *frameScanner) feed(p []byte, frame func(body []byte)) {
	if s.head == nil {
		if s.limit <= 0 {
			s.limit = frameHeadLen
		}
		s.head = make([]byte, 4+s.limit)
	}
	for len(p) > 0 {
		if s.skip > 0 {
			k := min(s.skip, len(p))
			s.skip -= k
			p = p[k:]
			continue
		}
		want := 4
		if s.have >= 4 {
			want = 4 + min(int(binary.BigEndian.Uint32(s.head[:4])), s.limit)
		}
		k := min(want-s.have, len(p))
		copy(s.head[s.have:], p[:k])
		s.have += k
		p = p[k:]
		if s.have < 4 {
			continue
		}
		size := int(binary.BigEndian.Uint32(s.head[:4]))
		want = 4 + min(size, s.limit)
		if s.have < want {
			continue
		}
		frame(s.head[4:want])
		s.skip = size - (want - 4)
		s.have = 0
	}
}
