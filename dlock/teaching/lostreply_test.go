package teaching_test

import (
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock/teaching"
	"github.com/zkstock/zkstock/dlock/testsupport/tcpproxy"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

const opCreate = 1 // ZooKeeper's create request (CreateContainer is another opcode)

// behindHerdHolder holds a herd lock on a fresh path with a client of its own, and connects a
// second client through a proxy that the test can cut: the waiter whose create reply is lost.
func behindHerdHolder(t *testing.T, session time.Duration) (path string, holder *teaching.Lease, proxy *tcpproxy.Proxy, waiter *teaching.Client) {
	t.Helper()
	servers := testenv.ZKServers(t)
	path = testenv.UniquePath(t)
	holder, err := teaching.NewHerdLock(connectTeaching(t, servers, 10*time.Second), path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy = tcpproxy.New(t, servers[0])
	return path, holder, proxy, connectTeaching(t, []string{proxy.Addr()}, session)
}

func connectTeaching(t *testing.T, servers []string, session time.Duration) *teaching.Client {
	t.Helper()
	c, err := teaching.Connect(ctxTimeout(t, 15*time.Second), servers, session, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A herd waiter's create that ZooKeeper applies but whose reply is lost (issue 46): the waiter
// must find its node by its protected name once the session is back and wait with it. Before,
// Lock failed with the connection error and left the node in the live session, where it held the
// lock for nobody once it was the lowest.
func TestHerdLostCreateReplyLeavesNoOrphan(t *testing.T) {
	path, holder, proxy, c := behindHerdHolder(t, 6*time.Second)
	proxy.CutAfterRequest(func(op int32) bool { return op == opCreate })
	createsBefore := c.Stats().Creates
	type result struct {
		lease *teaching.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() {
		l, err := teaching.NewHerdLock(c, path).Lock(ctxTimeout(t, 30*time.Second))
		got <- result{l, err}
	}()
	testenv.Eventually(t, 10*time.Second, "the waiter's node to reach ZooKeeper", func() bool { return len(children(t, path)) >= 2 })
	select {
	case r := <-got:
		t.Fatalf("lock behind a holder answered before the holder left: %v, %v", r.lease, r.err)
	case <-time.After(2 * time.Second): // long enough to reconnect and look again
	}
	if kids := children(t, path); len(kids) != 2 {
		t.Fatalf("queue %v: the create tried again left an orphan", kids)
	}
	if err := holder.Unlock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("lock after a lost create reply: %v", r.err)
	}
	if n := c.Stats().Creates - createsBefore; n != 1 {
		t.Fatalf("%d creates: the waiter did not find its own node by its protected name", n)
	}
	if err := r.lease.Unlock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if kids := children(t, path); len(kids) != 0 {
		t.Fatalf("nodes left behind: %v", kids)
	}
	// The lock is free for anyone.
	other, err := teaching.NewHerdLock(connectTeaching(t, testenv.ZKServers(t), 10*time.Second), path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("lock after the waiter left: %v", err)
	}
	if err := other.Unlock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// A herd waiter that gives up while it cannot learn what became of its create (the reply lost,
// the server out of reach until its context ends) must not leave its node either: the session
// comes back with the node in it, and the client deletes it once it finds it by name.
func TestHerdAbandonedLostCreateIsCleanedUp(t *testing.T) {
	path, holder, proxy, c := behindHerdHolder(t, 10*time.Second)
	proxy.CutAfterRequestAndHold(func(op int32) bool { return op == opCreate })
	if _, err := teaching.NewHerdLock(c, path).Lock(ctxTimeout(t, time.Second)); err == nil {
		t.Fatal("locked a held lock while cut off")
	}
	if kids := children(t, path); len(kids) != 2 {
		t.Fatalf("queue %v: the create did not reach ZooKeeper, so nothing was tested", kids)
	}
	proxy.Restore()
	testenv.Eventually(t, 10*time.Second, "the abandoned create's node to be deleted", func() bool { return len(children(t, path)) == 1 })
	if err := holder.Unlock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	other, err := teaching.NewHerdLock(c, path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("lock on the reconnected session after the holder left: %v", err)
	}
	if err := other.Unlock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// The fixed-node recipes after a lost create reply: the create tried again finds the node
// there, in the waiter's own session, and takes it as its own. Before, Lock failed with the
// connection error and the node held the lock for nobody until the session ended.
func TestFixedLostCreateReplyLeavesNoOrphan(t *testing.T) {
	for _, v := range []struct {
		name string
		lock func(*teaching.Client, string) teaching.Locker
	}{
		{"spin", func(c *teaching.Client, p string) teaching.Locker {
			return teaching.NewSpinLock(c, p, 5*time.Millisecond)
		}},
		{"node-watch", func(c *teaching.Client, p string) teaching.Locker { return teaching.NewNodeWatchLock(c, p) }},
	} {
		t.Run(v.name, func(t *testing.T) {
			servers := testenv.ZKServers(t)
			path := testenv.UniquePath(t)
			proxy := tcpproxy.New(t, servers[0])
			c := connectTeaching(t, []string{proxy.Addr()}, 6*time.Second)
			// The lock path first, so that the one create cut is the lock node's.
			warm, err := v.lock(c, path).Lock(ctxTimeout(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Unlock(ctxTimeout(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			proxy.CutAfterRequest(func(op int32) bool { return op == opCreate })
			createsBefore := c.Stats().Creates
			l, err := v.lock(c, path).Lock(ctxTimeout(t, 20*time.Second))
			if err != nil {
				t.Fatalf("lock after a lost create reply: %v", err)
			}
			if n := c.Stats().Creates - createsBefore; n != 2 {
				t.Fatalf("%d creates, want the one cut and the one tried again", n)
			}
			if err := l.Unlock(ctxTimeout(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			other, err := v.lock(connectTeaching(t, servers, 10*time.Second), path).Lock(ctxTimeout(t, 5*time.Second))
			if err != nil {
				t.Fatalf("lock after the first client left: %v", err)
			}
			if err := other.Unlock(ctxTimeout(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
