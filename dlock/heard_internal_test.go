package dlock

import (
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The scanner hands over each frame's head whatever the chunks the bytes arrive in: one byte at a
// time, a frame split anywhere, several frames in one read.
func TestFrameScannerAcrossChunks(t *testing.T) {
	bodies := [][]byte{{}, {1, 2, 3}, make([]byte, frameHeadLen), make([]byte, 300), {9}}
	for i, b := range bodies {
		for j := range b {
			b[j] = byte(i*31 + j)
		}
	}
	var stream []byte
	var want [][]byte
	for _, b := range bodies {
		stream = binary.BigEndian.AppendUint32(stream, uint32(len(b)))
		stream = append(stream, b...)
		want = append(want, b[:min(len(b), frameHeadLen)])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var s frameScanner
		var got [][]byte
		rest := stream
		for len(rest) > 0 {
			n := 1 + rng.IntN(len(rest))
			if round == 0 {
				n = 1
			}
			s.feed(rest[:n], func(head []byte) { got = append(got, slices.Clone(head)) })
			rest = rest[n:]
		}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("round %d: heads %v, want %v", round, got, want)
		}
	}
}

// fakeLiveness records what a heardConn reports, on a clock the test sets.
type fakeLiveness struct {
	clock   time.Duration
	gap     time.Duration
	timeout time.Duration
	proofs  []time.Duration
	sent    []time.Duration
	created []string
}

func (f *fakeLiveness) now() time.Duration               { return f.clock }
func (f *fakeLiveness) proofGap() time.Duration          { return f.gap }
func (f *fakeLiveness) negotiated(timeout time.Duration) { f.timeout = timeout }
func (f *fakeLiveness) proved(at time.Duration)          { f.proofs = append(f.proofs, at) }
func (f *fakeLiveness) proofSent(at time.Duration)       { f.sent = append(f.sent, at) }
func (f *fakeLiveness) createSent(path string)           { f.created = append(f.created, path) }

// scriptedConn hands out the bytes queued in replies, one frame per Read, and swallows writes.
type scriptedConn struct {
	net.Conn
	replies [][]byte
}

func (s *scriptedConn) Write(p []byte) (int, error) { return len(p), nil }

func (s *scriptedConn) Read(p []byte) (int, error) {
	r := s.replies[0]
	s.replies = s.replies[1:]
	return copy(p, r), nil
}

func frame(fields ...any) []byte {
	var body []byte
	for _, f := range fields {
		switch v := f.(type) {
		case int32:
			body = binary.BigEndian.AppendUint32(body, uint32(v))
		case int64:
			body = binary.BigEndian.AppendUint64(body, uint64(v))
		}
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// A proof (a sync or a write that succeeded) covers the requests answered at least G before it
// was sent, and nothing else: not itself, not what a follower answered on its own since, not a
// failed sync. A connect response proves its own send time.
func TestProofCoversRequestsAnsweredAGapBefore(t *testing.T) {
	const ms = time.Millisecond
	f := &fakeLiveness{gap: 300 * ms}
	conn := &scriptedConn{}
	h := newHeardConn(conn, f)
	buf := make([]byte, 256)
	send := func(at time.Duration, xid, op int32) {
		f.clock = at
		if _, err := h.Write(frame(xid, op)); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(at time.Duration, xid, errCode int32) {
		f.clock = at
		conn.replies = append(conn.replies, frame(xid, int64(7), errCode))
		if _, err := h.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what string, want ...time.Duration) {
		t.Helper()
		if !slices.Equal(f.proofs, want) {
			t.Fatalf("%s: proofs %v, want %v", what, f.proofs, want)
		}
	}

	f.clock = 10 * ms
	if _, err := h.Write(frame(int32(0), int32(0), int64(0), int32(2000))); err != nil { // connect request
		t.Fatal(err)
	}
	f.clock = 12 * ms
	conn.replies = append(conn.replies, frame(int32(0), int32(2000), int64(0x1234), int32(16)))
	if _, err := h.Read(buf); err != nil {
		t.Fatal(err)
	}
	if f.timeout != 2*time.Second {
		t.Fatalf("negotiated %v, want 2s", f.timeout)
	}
	expect("connect", 10*ms)

	send(100*ms, -2, 11) // ping
	answer(101*ms, -2, 0)
	send(200*ms, 1, opSync) // sent less than G after anything was answered: proves nothing
	answer(202*ms, 1, 0)
	expect("early sync", 10*ms)
	send(402*ms, 2, opSync) // 301 ms after the ping's answer: proves the ping, not the first sync
	answer(403*ms, 2, 0)
	expect("sync after the gap", 10*ms, 100*ms)

	send(500*ms, 3, 4) // getData, which a follower answers on its own
	answer(501*ms, 3, 0)
	send(900*ms, 4, opSync)
	answer(901*ms, 4, 112) // SESSIONEXPIRED: no proof, though it counts as answered
	expect("failed sync", 10*ms, 100*ms)
	send(1200*ms, 5, opCreate) // a write proves as a sync does: here the getData
	answer(1205*ms, 5, 0)
	expect("create", 10*ms, 100*ms, 500*ms)
	send(1210*ms, 6, opDelete) // and the failed sync, answered 310 ms before
	answer(1211*ms, 6, 0)
	expect("delete", 10*ms, 100*ms, 500*ms, 900*ms)

	if want := []time.Duration{200 * ms, 402 * ms, 900 * ms, 1200 * ms, 1210 * ms}; !slices.Equal(f.sent, want) {
		t.Fatalf("proofs sent at %v, want %v", f.sent, want)
	}
}

// Each create's path is reported once its frame has gone out, whatever the chunks it is written
// in; other requests, and a path too long for the head heardConn reads, are not.
func TestCreatesAreReportedWhenSent(t *testing.T) {
	f := &fakeLiveness{gap: time.Second}
	h := newHeardConn(&scriptedConn{}, f)
	write := func(b []byte, chunk int) {
		t.Helper()
		for len(b) > 0 {
			n := min(chunk, len(b))
			if _, err := h.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
	}
	create := func(xid, op int32, path string) []byte {
		body := binary.BigEndian.AppendUint32(nil, uint32(xid))
		body = binary.BigEndian.AppendUint32(body, uint32(op))
		body = binary.BigEndian.AppendUint32(body, uint32(len(path)))
		body = append(body, path...)
		body = binary.BigEndian.AppendUint32(body, 0)         // data
		body = binary.BigEndian.AppendUint32(body, 0)         // acl
		body = binary.BigEndian.AppendUint32(body, uint32(3)) // flags
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	write(frame(int32(0), int32(0), int64(0), int32(2000)), 100) // connect request
	long := "/" + strings.Repeat("x", maxPipelinedPath)
	write(create(1, opCreate, "/a/_c_1-lock-"), 1)
	write(frame(int32(2), int32(8)), 100) // getChildren2
	write(create(3, opCreateContainer, "/a"), 100)
	write(create(4, opCreate2, "/b/n-"), 7)
	write(create(5, opCreate, long), 100)
	if want := []string{"/a/_c_1-lock-", "/b/n-"}; !slices.Equal(f.created, want) {
		t.Fatalf("creates reported %q, want %q", f.created, want)
	}
}

// countingConn hands out everything queued in one Read, and counts the reads; once it has nothing
// left, every Read fails with err (io.EOF when nil).
type countingConn struct {
	net.Conn
	queued []byte
	reads  int
	err    error
}

func (c *countingConn) Write(p []byte) (int, error) { return len(p), nil }

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	if len(c.queued) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := copy(p, c.queued)
	c.queued = c.queued[n:]
	return n, nil
}

// Replies read the way go-zookeeper reads them, each a length and then a body, come from one
// read of the socket when they arrived together, and every one of them is still heard: here a
// pipelined create's reply and its queue read's, which prove the create and answer the read.
func TestRepliesThatArriveTogetherAreReadOnce(t *testing.T) {
	const ms = time.Millisecond
	f := &fakeLiveness{gap: 300 * ms}
	conn := &countingConn{}
	h := newHeardConn(conn, f)
	write := func(at time.Duration, b []byte) {
		f.clock = at
		if _, err := h.Write(b); err != nil {
			t.Fatal(err)
		}
	}

	write(10*ms, frame(int32(0), int32(0), int64(0), int32(2000))) // connect request
	f.clock = 11 * ms
	conn.queued = frame(int32(0), int32(2000), int64(0x1234), int32(16))
	readReply(t, h)
	write(100*ms, frame(int32(1), int32(4))) // getData
	f.clock = 101 * ms
	conn.queued = frame(int32(1), int64(7), int32(0))
	readReply(t, h)
	write(500*ms, frame(int32(2), int32(opCreate)))
	write(500*ms, frame(int32(3), int32(12))) // getChildren2, sent behind the create
	f.clock = 502 * ms
	conn.queued = append(frame(int32(2), int64(8), int32(0)), frame(int32(3), int64(8), int32(0))...)
	conn.reads = 0
	for _, xid := range []uint32{2, 3} {
		if got := binary.BigEndian.Uint32(readReply(t, h)); got != xid {
			t.Fatalf("reply for xid %d, want %d", got, xid)
		}
	}
	if conn.reads != 1 {
		t.Fatalf("two replies that arrived together took %d reads of the socket, want 1", conn.reads)
	}
	if want := []time.Duration{10 * ms, 100 * ms}; !slices.Equal(f.proofs, want) {
		t.Fatalf("proofs %v, want %v: the create's reply proves the getData answered 399 ms before it", f.proofs, want)
	}
	if len(h.pending) != 0 {
		t.Fatalf("requests left unanswered: %v", h.pending)
	}
	if _, err := h.Read(make([]byte, 4)); err != io.EOF {
		t.Fatalf("read past the replies: %v, want io.EOF", err)
	}
}

// A reply read into the buffer before the connection failed (a deadline passed, the server
// closed it) is handed over whole, and the failure after it, unchanged.
func TestBufferedReplyComesBeforeTheError(t *testing.T) {
	f := &fakeLiveness{gap: 300 * time.Millisecond}
	conn := &countingConn{queued: frame(int32(0), int32(2000), int64(0x1234), int32(16)), err: os.ErrDeadlineExceeded}
	h := newHeardConn(conn, f)
	body := readReply(t, h)
	var size [4]byte
	if got := binary.BigEndian.Uint64(body[8:16]); got != 0x1234 {
		t.Fatalf("session %#x, want 0x1234", got)
	}
	for range 2 {
		if _, err := h.Read(size[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("after the reply: %v, want the connection's error", err)
		}
	}
}

// readReply reads one reply as go-zookeeper does: its length, then its body.
func readReply(t *testing.T, r io.Reader) []byte {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	return body
}
