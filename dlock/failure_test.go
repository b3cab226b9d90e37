package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/tcpproxy"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

const opCreate = 1 // ZooKeeper's create request

// behindHolder is where the create-loss tests start: path's lock held by a client of its own,
// and a client c that reaches ZooKeeper through a proxy the test can cut.
type behindHolder struct {
	path   string
	raw    *zk.Conn
	holder *dlock.Lease
	proxy  *tcpproxy.Proxy
	c      *dlock.Client
}

// Both clients get opts; with any, the lock path is below a directory of the test's own (openDir).
func queueBehindHolder(t *testing.T, session time.Duration, opts ...dlock.Option) behindHolder {
	t.Helper()
	servers := testenv.ZKServers(t)
	s := behindHolder{path: testenv.UniquePath(t), raw: rawConn(t), proxy: tcpproxy.New(t, servers[0])}
	if len(opts) > 0 {
		s.path = openDir(t, s.raw) + "/lock"
	}
	var err error
	if s.holder, err = dlock.NewMutex(connect(t, servers, opts...), s.path).Lock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	s.c = connect(t, []string{s.proxy.Addr()}, append(opts, dlock.WithSessionTimeout(session))...)
	return s
}

// withACLs runs test with open nodes and with WithDigest's: a client that finds or deletes its
// node after a reconnect must be authenticated again by then.
func withACLs(t *testing.T, test func(t *testing.T, opts ...dlock.Option)) {
	t.Run("open", func(t *testing.T) { test(t) })
	t.Run("digest", func(t *testing.T) { test(t, dlock.WithDigest(aclUser, aclPassword)) })
}

func TestConnectionLossDuringCreateLeavesNoOrphan(t *testing.T) {
	withACLs(t, testConnectionLossDuringCreateLeavesNoOrphan)
}

func testConnectionLossDuringCreateLeavesNoOrphan(t *testing.T, opts ...dlock.Option) {
	s := queueBehindHolder(t, 6*time.Second, opts...)
	path, raw, holder, proxy, c := s.path, s.raw, s.holder, s.proxy, s.c
	proxy.CutAfterRequest(func(op int32) bool { return op == opCreate })
	createsBefore := c.Stats().Creates

	// The create reaches ZooKeeper although the client never sees its reply; 2 s are long
	// enough for the client to reconnect and look again.
	got := lockBehind(t, dlock.NewMutex(c, path), 30*time.Second, raw, path, 2, 2*time.Second)
	if nodes := lockNodes(t, raw, path); len(nodes) != 2 {
		t.Fatalf("queue %v: the retried create left an orphan", nodes)
	}
	mustUnlock(t, holder)
	a := <-got
	if a.err != nil {
		t.Fatalf("lock after the connection loss: %v", a.err)
	}
	if n := c.Stats().Creates - createsBefore; n != 1 {
		t.Fatalf("%d creates: the client did not find its own node by GUID", n)
	}
	mustUnlock(t, a.lease)
	if nodes := lockNodes(t, raw, path); len(nodes) != 0 {
		t.Fatalf("nodes left behind: %v", nodes)
	}
}

// A Lock that gives up while it cannot learn whether its create was applied (the reply lost, the
// server unreachable until the context ends) must still not leave its node behind: the session
// comes back with the node in it, ahead of every later waiter, and nobody would ever delete it.
func TestAbandonedCreateIsCleanedUpWhenTheSessionReturns(t *testing.T) {
	withACLs(t, testAbandonedCreateIsCleanedUpWhenTheSessionReturns)
}

func testAbandonedCreateIsCleanedUpWhenTheSessionReturns(t *testing.T, opts ...dlock.Option) {
	s := queueBehindHolder(t, 10*time.Second, opts...)
	path, raw, holder, proxy, c := s.path, s.raw, s.holder, s.proxy, s.c
	sid := c.SessionID()
	proxy.CutAfterRequestAndHold(func(op int32) bool { return op == opCreate })
	_, err := dlock.NewMutex(c, path).Lock(ctxTimeout(t, time.Second))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock while cut off: %v, want a deadline error", err)
	}
	if nodes := lockNodes(t, raw, path); len(nodes) != 2 {
		t.Fatalf("queue %v: the create did not reach ZooKeeper, so nothing was tested", nodes)
	}
	proxy.Restore()
	eventually(t, 10*time.Second, "the abandoned create's node to be deleted", func() bool { return len(lockNodes(t, raw, path)) == 1 })
	if c.SessionID() != sid {
		t.Fatalf("session changed from %#x to %#x: the node went with it, nothing was tested", sid, c.SessionID())
	}
	mustUnlock(t, holder)
}

func TestSessionExpiryLosesLeaseAndFencesIt(t *testing.T) {
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	proxy := tcpproxy.New(t, servers[0])
	const session = 1500 * time.Millisecond
	h := connect(t, []string{proxy.Addr()}, dlock.WithSessionTimeout(session))
	hm := dlock.NewMutex(h, path)
	old, err := hm.Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	select {
	case <-old.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost did not close while the holder was cut off")
	}
	if !errors.Is(old.Err(), dlock.ErrLost) {
		t.Fatalf("lease error %v, want ErrLost", old.Err())
	}

	other := connect(t, servers)
	next, err := dlock.NewMutex(other, path).Lock(ctxTimeout(t, 20*time.Second))
	if err != nil {
		t.Fatalf("another client could not take the expired holder's lock: %v", err)
	}
	if next.Token() <= old.Token() {
		t.Fatalf("new token %d is not above the lost holder's %d", next.Token(), old.Token())
	}
	proxy.Restore()
	if err := old.Unlock(ctxTimeout(t, 5*time.Second)); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("unlock after loss: %v, want ErrLost", err)
	}
	mustUnlock(t, next)

	// The same Mutex works again on the client's new session (go-zookeeper's zk.Lock answers
	// ErrDeadlock forever here).
	again, err := hm.Lock(ctxTimeout(t, 20*time.Second))
	if err != nil {
		t.Fatalf("lock again after loss: %v", err)
	}
	if again.Token() <= next.Token() {
		t.Fatalf("token %d not above %d", again.Token(), next.Token())
	}
	mustUnlock(t, again)
}

func TestDisconnectLongerThanTwoThirdsLosesLease(t *testing.T) {
	servers := testenv.ZKServers(t)
	proxy := tcpproxy.New(t, servers[0])
	const session = 6 * time.Second
	c := connect(t, []string{proxy.Addr()}, dlock.WithSessionTimeout(session))
	path := testenv.UniquePath(t)
	l, err := dlock.NewMutex(c, path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sid := c.SessionID()
	proxy.Cut()
	select {
	case <-l.Lost():
		t.Fatal("Lost closed at once: a short disconnection must be tolerated")
	case <-time.After(session / 3):
	}
	select {
	case <-l.Lost():
	case <-time.After(session):
		t.Fatal("Lost did not close within the session timeout")
	}
	// Back before the server expired the session: the session survives, and its stale node is
	// removed so that it cannot block the queue.
	proxy.Restore()
	raw := rawConn(t)
	eventually(t, 10*time.Second, "the lost lease's node to be deleted", func() bool { return len(lockNodes(t, raw, path)) == 0 })
	if c.SessionID() != sid {
		t.Logf("session changed from %#x to %#x (the server expired it first)", sid, c.SessionID())
	}
}

func TestCloseReleasesAtOnce(t *testing.T) {
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	a := connect(t, servers, dlock.WithSessionTimeout(20*time.Second))
	b := connect(t, servers)
	la, err := dlock.NewMutex(a, path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := dlock.NewMutex(b, path).Lock(ctxTimeout(t, 30*time.Second))
		if err == nil {
			err = l.Unlock(context.Background())
		}
		got <- err
	}()
	waitNodes(t, rawConn(t), path, 2)
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // half the session timeout
		t.Fatal("the waiter did not get the lock soon after Close")
	}
	t.Logf("next waiter acquired %v after Close (session timeout 20s)", time.Since(start))
	select {
	case <-la.Lost():
	default:
		t.Fatal("Close did not close the lease's Lost channel")
	}
	if _, err := dlock.NewMutex(a, path).Lock(context.Background()); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("lock on a closed client: %v, want ErrClosed", err)
	}
}

func TestCloseWhileUnreachable(t *testing.T) {
	servers := testenv.ZKServers(t)
	proxy := tcpproxy.New(t, servers[0])
	c := connect(t, []string{proxy.Addr()})
	path := testenv.UniquePath(t)
	if _, err := dlock.NewMutex(c, path).Lock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	waiter := make(chan error, 1)
	go func() {
		_, err := dlock.NewMutex(c, path).Lock(context.Background())
		waiter <- err
	}()
	waitNodes(t, rawConn(t), path, 2)
	proxy.Cut()
	done := make(chan struct{})
	go func() { _ = c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung while ZooKeeper was unreachable")
	}
	if err := <-waiter; !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("waiter on a closed client: %v, want ErrClosed", err)
	}
}

func TestWaiterWhoseSessionExpiredNeverHoldsWithoutNode(t *testing.T) {
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	raw := rawConn(t)
	holder, err := dlock.NewMutex(connect(t, servers), path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, servers[0])
	w := connect(t, []string{proxy.Addr()}, dlock.WithSessionTimeout(1500*time.Millisecond))
	got := make(chan *dlock.Lease, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := dlock.NewMutex(w, path).Lock(ctxTimeout(t, time.Minute))
		if err != nil {
			errc <- err
			return
		}
		got <- l
	}()
	waitNodes(t, raw, path, 2)
	oldSession := w.SessionID()
	proxy.Cut()
	waitNodes(t, raw, path, 1) // the server expired the waiter's session and deleted its node
	proxy.Restore()
	eventually(t, 15*time.Second, "a new session", func() bool { s := w.SessionID(); return s != 0 && s != oldSession })
	// The waiter queues again with a new node; it must not report the lock as its own.
	waitNodes(t, raw, path, 2)
	select {
	case l := <-got:
		t.Fatalf("waiter acquired %s while another client held the lock", l.Node())
	case err := <-errc:
		t.Fatalf("waiter failed instead of queueing again: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	mustUnlock(t, holder)
	var l *dlock.Lease
	select {
	case l = <-got:
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(15 * time.Second):
		t.Fatal("waiter did not acquire after the holder released")
	}
	ok, st, err := raw.Exists(l.Node())
	if err != nil || !ok {
		t.Fatalf("lease node %s does not exist (%v)", l.Node(), err)
	}
	if st.EphemeralOwner != w.SessionID() {
		t.Fatalf("lease node owned by %#x, client session is %#x", st.EphemeralOwner, w.SessionID())
	}
	mustUnlock(t, l)
}

func TestLockWaitsOutAnOutage(t *testing.T) {
	servers := testenv.ZKServers(t)
	proxy := tcpproxy.New(t, servers[0])
	c := connect(t, []string{proxy.Addr()}, dlock.WithSessionTimeout(10*time.Second))
	path := testenv.UniquePath(t)
	proxy.Cut()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := dlock.NewMutex(c, path).Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock while unreachable: %v, want DeadlineExceeded", err)
	}
	proxy.Restore()
	l, err := dlock.NewMutex(c, path).Lock(ctxTimeout(t, 15*time.Second))
	if err != nil {
		t.Fatalf("lock after the outage: %v", err)
	}
	mustUnlock(t, l)
}
