package dlock_test

import (
	"encoding/binary"
	"errors"
	"net"
	"path"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/tcpproxy"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

const opGetChildren2 = 12 // ZooKeeper's getChildren2 request, what go-zookeeper's Children sends

// An uncontended Lock knows it holds after one round trip: its queue read goes out behind its
// create before the create's answer is back. Every reply reaches the client a fixed delay after
// the server sent it, so reading the queue only once the create was answered would take two
// delays; the wire shows the read leaving before the create's answer arrived, and Stats counts
// the read as pipelined. The release stays one more round trip, confirmed.
func TestUncontendedLockTakesOneRoundTrip(t *testing.T) {
	const delay = 250 * time.Millisecond
	dir := persistentPath(t)
	wire := &wireLog{}
	c := connect(t, testenv.ZKServers(t), dlock.WithDialer(wire.dial))
	m := dlock.NewMutex(c, dir)

	before := c.Stats()
	wire.start(delay)
	start := time.Now()
	lease, err := m.Lock(ctxTimeout(t, 10*time.Second))
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	held := c.Stats()
	wire.stop()
	mustUnlock(t, lease)
	after := c.Stats()

	t.Logf("Lock took %v with replies %v late", took, delay)
	if took >= 2*delay {
		t.Errorf("Lock took %v, two replies' delay or more (%v): the queue read waited for the create's answer", took, 2*delay)
	}
	events := wire.events()
	create := slices.IndexFunc(events, func(e wireEvent) bool { return e.out && e.opcode == opCreate })
	if create < 0 {
		t.Fatalf("no create on the wire: %v", events)
	}
	xid := events[create].xid
	read := slices.IndexFunc(events, func(e wireEvent) bool { return e.out && e.opcode == opGetChildren2 })
	answered := slices.IndexFunc(events, func(e wireEvent) bool { return !e.out && e.xid == xid })
	if read < 0 || answered < 0 || !(create < read && read < answered) {
		t.Fatalf("wire %v: want the create (at %d), the queue read (at %d), then the create's answer (at %d)",
			events, create, read, answered)
	}

	lock, total := diff(held, before), diff(after, before)
	if lock.Creates != 1 || lock.ChildrenCalls != 1 || lock.Pipelined != 1 || lock.RoundTrips() != 1 {
		t.Errorf("Lock: %+v, want one create and one children read sent behind it: one round trip", lock)
	}
	if total.Ops() != 3 || total.RoundTrips() != 2 || total.Deletes != 1 {
		t.Errorf("Lock and Unlock: %+v (%d requests, %d round trips), want 3 requests in 2 round trips",
			total, total.Ops(), total.RoundTrips())
	}
}

// The create's answer is lost (the connection drops once the create reached ZooKeeper), and the
// queue read behind it with it. The client finds its node by its protected name, reads the queue
// itself, and holds; no second node, and nothing left behind.
func TestLostCreateReplyOnTheOneRoundTripPath(t *testing.T) {
	servers := testenv.ZKServers(t)
	dir := persistentPath(t)
	raw := rawConn(t)
	proxy := tcpproxy.New(t, servers[0])
	c := connect(t, []string{proxy.Addr()}, dlock.WithSessionTimeout(6*time.Second))
	sid := c.SessionID()
	before := c.Stats()
	proxy.CutAfterRequest(func(op int32) bool { return op == opCreate })

	lease, err := dlock.NewMutex(c, dir).Lock(ctxTimeout(t, 20*time.Second))
	if err != nil {
		t.Fatalf("lock after the create's answer was lost: %v", err)
	}
	if c.SessionID() != sid {
		t.Fatalf("session changed from %#x to %#x: the node went with it, nothing was tested", sid, c.SessionID())
	}
	nodes := lockNodes(t, raw, dir)
	if len(nodes) != 1 || path.Base(lease.Node()) != nodes[0] {
		t.Fatalf("queue %v, lease on %s: want just the lease's node", nodes, lease.Node())
	}
	if n := diff(c.Stats(), before).Creates; n != 1 {
		t.Fatalf("%d creates: the client did not find its own node by its protected name", n)
	}
	mustUnlock(t, lease)
	if nodes := lockNodes(t, raw, dir); len(nodes) != 0 {
		t.Fatalf("nodes left behind: %v", nodes)
	}
}

// A queue read behind the create sees the nodes ahead: with a holder there, a second client waits
// and is served next; TryLock answers ErrLocked and leaves nothing behind.
func TestOneRoundTripPathSeesTheHolder(t *testing.T) {
	servers := testenv.ZKServers(t)
	dir := persistentPath(t)
	raw := rawConn(t)
	a, b := connect(t, servers), connect(t, servers)
	held, err := dlock.NewMutex(a, dir).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dlock.NewMutex(b, dir).TryLock(ctxTimeout(t, 5*time.Second)); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("TryLock while held: %v, want ErrLocked", err)
	}
	got := lockBehind(t, dlock.NewMutex(b, dir), 10*time.Second, raw, dir, 2, 300*time.Millisecond)
	mustUnlock(t, held)
	answer := <-got
	if answer.err != nil {
		t.Fatal(answer.err)
	}
	next := answer.lease
	if next.Token() <= held.Token() {
		t.Fatalf("token %d after %d", next.Token(), held.Token())
	}
	mustUnlock(t, next)
	if nodes := lockNodes(t, raw, dir); len(nodes) != 0 {
		t.Fatalf("nodes left behind: %v", nodes)
	}
}

// persistentPath is a lock path that exists for the whole test, so that no Lock creates it (nor
// the server reaps it as an empty container) while the test counts requests.
func persistentPath(t *testing.T) string {
	t.Helper()
	raw := rawConn(t)
	dir := testenv.UniquePath(t)
	for _, p := range []string{path.Dir(dir), dir} {
		if _, err := raw.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	t.Cleanup(func() { _ = raw.Delete(dir, -1) })
	return dir
}

func diff(a, b dlock.Stats) dlock.Stats {
	return dlock.Stats{
		Creates: a.Creates - b.Creates, Deletes: a.Deletes - b.Deletes, ChildrenCalls: a.ChildrenCalls - b.ChildrenCalls,
		ExistsCalls: a.ExistsCalls - b.ExistsCalls, GetCalls: a.GetCalls - b.GetCalls,
		WatchEvents: a.WatchEvents - b.WatchEvents, Acquisitions: a.Acquisitions - b.Acquisitions,
		Pipelined: a.Pipelined - b.Pipelined,
	}
}

// wireLog records the requests a client writes and the replies it reads, in the order the client
// wrote and read them, and while started delivers every reply a fixed delay after it arrived.
type wireLog struct {
	mu    sync.Mutex
	on    bool
	delay time.Duration
	log   []wireEvent
}

type wireEvent struct {
	out    bool // a request; else a reply
	xid    int32
	opcode int32 // of a request
}

func (w *wireLog) start(delay time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on, w.delay, w.log = true, delay, nil
}

func (w *wireLog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on, w.delay = false, 0
}

func (w *wireLog) events() []wireEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.log)
}

func (w *wireLog) record(e wireEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.on {
		w.log = append(w.log, e)
	}
}

func (w *wireLog) currentDelay() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.delay
}

func (w *wireLog) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	d := &delayedConn{Conn: conn, w: w, chunks: make(chan chunk, 1024)}
	go d.pump()
	return d, nil
}

// delayedConn reads the server's bytes as they come and hands each chunk to the client no sooner
// than the delay after it came: a link that is that much slower one way.
type delayedConn struct {
	net.Conn
	w       *wireLog
	chunks  chan chunk
	pending []byte
	readErr error
	out, in frameLog
}

type chunk struct {
	at   time.Time
	b    []byte
	err  error
	wait time.Duration
}

func (d *delayedConn) pump() {
	for {
		buf := make([]byte, 32<<10)
		n, err := d.Conn.Read(buf)
		d.chunks <- chunk{at: time.Now(), b: buf[:n], err: err, wait: d.w.currentDelay()}
		if err != nil {
			close(d.chunks)
			return
		}
	}
}

func (d *delayedConn) Read(p []byte) (int, error) {
	if len(d.pending) == 0 {
		if d.readErr != nil {
			return 0, d.readErr
		}
		c, ok := <-d.chunks
		if !ok {
			return 0, net.ErrClosed
		}
		time.Sleep(time.Until(c.at.Add(c.wait)))
		d.pending, d.readErr = c.b, c.err
		d.in.feed(c.b, func(body []byte) {
			d.w.record(wireEvent{xid: int32(binary.BigEndian.Uint32(body))})
		})
		if len(d.pending) == 0 {
			return 0, d.readErr
		}
	}
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	return n, nil
}

func (d *delayedConn) Write(p []byte) (int, error) {
	d.out.feed(p, func(body []byte) {
		if len(body) >= 8 {
			d.w.record(wireEvent{out: true, xid: int32(binary.BigEndian.Uint32(body)), opcode: int32(binary.BigEndian.Uint32(body[4:]))})
		}
	})
	return d.Conn.Write(p)
}

// frameLog follows ZooKeeper's framing (a 4-byte length, then the body) and hands over each
// complete frame's body.
type frameLog struct{ buf []byte }

func (f *frameLog) feed(p []byte, frame func(body []byte)) {
	f.buf = append(f.buf, p...)
	for len(f.buf) >= 4 {
		n := int(binary.BigEndian.Uint32(f.buf))
		if len(f.buf) < 4+n {
			return
		}
		if n >= 4 {
			frame(f.buf[4 : 4+n])
		}
		f.buf = f.buf[4+n:]
	}
}
