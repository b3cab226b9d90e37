package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

func TestMutexExcludesAcrossSessions(t *testing.T) {
	const clients, goroutines, rounds = 3, 10, 50
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	var ex exclusion
	var wg sync.WaitGroup
	var total, tokensOutOfOrder int64
	var mu sync.Mutex
	lastToken := int64(0)
	for ci := 0; ci < clients; ci++ {
		c := connect(t, servers)
		m := dlock.NewMutex(c, path)
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					lease, err := m.Lock(ctxTimeout(t, time.Minute))
					if err != nil {
						t.Errorf("lock: %v", err)
						return
					}
					ex.enter()
					mu.Lock()
					// Tokens must grow with every holder, as storage fencing relies on.
					if lease.Token() <= lastToken {
						tokensOutOfOrder++
					}
					lastToken = lease.Token()
					total++
					mu.Unlock()
					runtime.Gosched()
					ex.leave()
					mustUnlock(t, lease)
				}
			}()
		}
	}
	wg.Wait()
	if n := ex.overlaps.Load(); n != 0 {
		t.Fatalf("%d times two holders were inside at once", n)
	}
	if total != clients*goroutines*rounds {
		t.Fatalf("acquired %d times, want %d", total, clients*goroutines*rounds)
	}
	if tokensOutOfOrder != 0 {
		t.Fatalf("%d holders had a token not larger than the previous holder's", tokensOutOfOrder)
	}
	if left := lockNodes(t, rawConn(t), path); len(left) != 0 {
		t.Fatalf("nodes left behind: %v", left)
	}
}

// queueWaiters starts n waiters on path, one at a time, each only after the previous one's node
// is in ZooKeeper, so the queue order is known. Each waiter records its index when it acquires,
// then waits for release before unlocking.
func queueWaiters(t *testing.T, clients []*dlock.Client, path string, n, already int,
	ctxFor func(i int) context.Context, log *orderLog, ex *exclusion, release <-chan struct{}) []chan error {
	t.Helper()
	raw := rawConn(t)
	results := make([]chan error, n)
	for i := 0; i < n; i++ {
		results[i] = make(chan error, 1)
		m := dlock.NewMutex(clients[i%len(clients)], path)
		go func(i int) {
			lease, err := m.Lock(ctxFor(i))
			if err != nil {
				results[i] <- err
				return
			}
			ex.enter()
			log.add(i)
			if release != nil {
				<-release
			}
			ex.leave()
			results[i] <- lease.Unlock(context.Background())
		}(i)
		waitNodes(t, raw, path, already+i+1)
	}
	return results
}

func TestMutexIsFIFO(t *testing.T) {
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	clients := []*dlock.Client{connect(t, servers), connect(t, servers), connect(t, servers)}
	holder, err := dlock.NewMutex(clients[0], path).Lock(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var log orderLog
	var ex exclusion
	const n = 12
	results := queueWaiters(t, clients, path, n, 1, func(int) context.Context { return ctxTimeout(t, time.Minute) }, &log, &ex, nil)
	mustUnlock(t, holder)
	for i, r := range results {
		if err := <-r; err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if got := log.get(); !slices.Equal(got, want) {
		t.Fatalf("acquisition order %v, want queue order %v", got, want)
	}
	if ex.overlaps.Load() != 0 {
		t.Fatal("two holders at once")
	}
}

func TestMutexReleaseWakesOneWaiter(t *testing.T) {
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	var clients []*dlock.Client
	for i := 0; i < 5; i++ {
		clients = append(clients, connect(t, servers))
	}
	watchEvents := func() (sum int64) {
		for _, c := range clients {
			sum += c.Stats().WatchEvents
		}
		return sum
	}
	holder, err := dlock.NewMutex(clients[0], path).Lock(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	var log orderLog
	var ex exclusion
	release := make(chan struct{})
	results := queueWaiters(t, clients, path, n, 1, func(int) context.Context { return ctxTimeout(t, 2*time.Minute) }, &log, &ex, release)
	before := watchEvents()
	if before != 0 {
		t.Fatalf("%d watch events before any release", before)
	}
	mustUnlock(t, holder)
	// Release the holders one at a time; each release may wake at most one waiter.
	for i := 0; i < n; i++ {
		eventually(t, 10*time.Second, "the next waiter to acquire", func() bool { return len(log.get()) == i+1 })
		if got := watchEvents() - before; got > 1 {
			t.Fatalf("release %d woke %d waiters", i, got)
		}
		before = watchEvents()
		release <- struct{}{}
		if err := <-results[i]; err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
	var acq int64
	for _, c := range clients {
		acq += c.Stats().Acquisitions
	}
	if acq != n+1 {
		t.Fatalf("acquisitions %d, want %d", acq, n+1)
	}
	if got := log.get(); !slices.IsSorted(got) {
		t.Fatalf("acquisition order %v is not the queue order", got)
	}
}

func TestMutexCancelledWaiterLeavesQueue(t *testing.T) {
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	clients := []*dlock.Client{connect(t, servers), connect(t, servers)}
	raw := rawConn(t)
	holder, err := dlock.NewMutex(clients[0], path).Lock(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const n, cancelled = 5, 2
	cancelCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log orderLog
	var ex exclusion
	results := queueWaiters(t, clients, path, n, 1, func(i int) context.Context {
		if i == cancelled {
			return cancelCtx
		}
		return ctxTimeout(t, time.Minute)
	}, &log, &ex, nil)

	queued := lockNodes(t, raw, path)
	cancel()
	err = <-results[cancelled]
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter returned %v, want context.Canceled", err)
	}
	// The call has deleted its node by the time it returns.
	after := lockNodes(t, raw, path)
	if len(after) != len(queued)-1 {
		t.Fatalf("after cancel the queue is %v, was %v: the waiter's node is still there", after, queued)
	}

	mustUnlock(t, holder)
	for i, r := range results {
		if i == cancelled {
			continue
		}
		if err := <-r; err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
	if got, want := log.get(), []int{0, 1, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if ex.overlaps.Load() != 0 {
		t.Fatal("two holders at once")
	}
	if left := lockNodes(t, raw, path); len(left) != 0 {
		t.Fatalf("nodes left behind: %v", left)
	}
}

func TestMutexDeadlineWrapsContextError(t *testing.T) {
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	a, b := connect(t, servers), connect(t, servers)
	held, err := dlock.NewMutex(a, path).Lock(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer mustUnlock(t, held)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = dlock.NewMutex(b, path).Lock(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	if nodes := lockNodes(t, rawConn(t), path); len(nodes) != 1 {
		t.Fatalf("queue %v: want only the holder's node", nodes)
	}
}

func TestTryLock(t *testing.T) {
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	a, b := connect(t, servers), connect(t, servers)
	raw := rawConn(t)
	la, err := dlock.NewMutex(a, path).TryLock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("trylock on a free lock: %v", err)
	}
	_, err = dlock.NewMutex(b, path).TryLock(ctxTimeout(t, 5*time.Second))
	if !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("trylock on a held lock: %v, want ErrLocked", err)
	}
	if nodes := lockNodes(t, raw, path); len(nodes) != 1 {
		t.Fatalf("failed TryLock left nodes: %v", nodes)
	}
	// A waiter also makes TryLock answer ErrLocked.
	waiting := make(chan *dlock.Lease, 1)
	go func() {
		l, err := dlock.NewMutex(b, path).Lock(ctxTimeout(t, 30*time.Second))
		if err != nil {
			t.Errorf("lock: %v", err)
		}
		waiting <- l
	}()
	waitNodes(t, raw, path, 2)
	mustUnlock(t, la)
	lb := <-waiting
	if _, err := dlock.NewMutex(a, path).TryLock(ctxTimeout(t, 5*time.Second)); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("trylock while b holds: %v", err)
	}
	mustUnlock(t, lb)
	if b.Stats().Acquisitions != 1 || a.Stats().Acquisitions != 1 {
		t.Fatalf("acquisitions a=%d b=%d, want 1 each", a.Stats().Acquisitions, b.Stats().Acquisitions)
	}
}

func TestUnlockIsIdempotent(t *testing.T) {
	c := connect(t, testenv.ZKServers(t))
	path := testenv.UniquePath(t)
	m := dlock.NewMutex(c, path)
	l, err := m.Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := l.Unlock(context.Background()); err != nil {
			t.Fatalf("unlock #%d: %v", i+1, err)
		}
	}
	if nodes := lockNodes(t, rawConn(t), path); len(nodes) != 0 {
		t.Fatalf("nodes after unlock: %v", nodes)
	}
	select {
	case <-l.Lost():
		t.Fatal("Unlock closed Lost")
	default:
	}
	l2, err := m.Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("lock again: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token %d not above the previous %d", l2.Token(), l.Token())
	}
	mustUnlock(t, l2)
}

func TestLeaseLostWhenNodeDeletedByOthers(t *testing.T) {
	c := connect(t, testenv.ZKServers(t))
	raw := rawConn(t)
	l, err := dlock.NewMutex(c, testenv.UniquePath(t)).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(l.Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost did not close after the node was deleted")
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("unlock after loss: %v, want ErrLost", err)
	}
}

// One queue, whoever wrote the nodes: a sequential child of any name is a contender and blocks a
// Mutex, as Curator's, kazoo's and zk.Lock's nodes must; a child without a sequence suffix is not.
func TestForeignSequentialChildrenAreContenders(t *testing.T) {
	c := connect(t, testenv.ZKServers(t))
	raw := rawConn(t)
	path := testenv.UniquePath(t)
	m := dlock.NewMutex(c, path)
	l, err := m.Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, l)
	for _, name := range []string{"config", "lease_holder", "_c_0123456789abcdef0123456789abcdef-lock-12"} {
		if _, err := raw.Create(path+"/"+name, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		defer raw.Delete(path+"/"+name, -1)
	}
	if l, err = m.Lock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatalf("lock beside non-sequential nodes: %v", err)
	}
	mustUnlock(t, l)
	if l, err = m.TryLock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatalf("trylock beside non-sequential nodes: %v", err)
	}
	mustUnlock(t, l)

	for _, prefix := range []string{"some-other-tool-", "f00d__lock__", "_c_" + "0f8fad5b-d9cb-469f-a165-70867728950e-__WRIT__"} {
		foreign, err := raw.Create(path+"/"+prefix, nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.TryLock(ctxTimeout(t, 5*time.Second)); !errors.Is(err, dlock.ErrLocked) {
			t.Fatalf("trylock with %s ahead: %v, want ErrLocked", foreign, err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := m.Lock(ctxTimeout(t, 20*time.Second))
			if err == nil {
				err = l.Unlock(context.Background())
			}
			got <- err
		}()
		waitNodes(t, raw, path, 5) // three non-sequential, the foreign node and the waiter
		select {
		case err := <-got:
			t.Fatalf("Lock returned while %s was ahead: %v", foreign, err)
		case <-time.After(300 * time.Millisecond):
		}
		if err := raw.Delete(foreign, -1); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("lock after %s left: %v", foreign, err)
		}
	}
}

func TestLockPathIsAContainer(t *testing.T) {
	c := connect(t, testenv.ZKServers(t))
	raw := rawConn(t)
	base := testenv.UniquePath(t)
	path := base + "/sku/SKU-1"
	l, err := dlock.NewMutex(c, path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := raw.Exists(path); err != nil || !ok {
		t.Fatalf("lock path missing while held: %v", err)
	}
	mustUnlock(t, l)
	// ZooKeeper hides the container marker from clients, so the test checks what it does: the
	// test server checks containers every second, and the idle lock path and its parents go.
	eventually(t, 20*time.Second, "the idle lock path to be removed", func() bool {
		ok, _, err := raw.Exists(path)
		return err == nil && !ok
	})
	eventually(t, 20*time.Second, "its empty parents to be removed", func() bool {
		ok, _, err := raw.Exists(base)
		return err == nil && !ok
	})
}

// ZooKeeper may reap an empty container parent between the moment a Lock creates it and the
// moment it creates the next level. A deleter that removes the empty path from the leaf up,
// far more often than the server's container check, makes that race common; every Lock must
// still succeed.
func TestLockSurvivesParentsReaped(t *testing.T) {
	c := connect(t, testenv.ZKServers(t))
	raw := rawConn(t)
	base := testenv.UniquePath(t)
	path := base + "/a/b"
	levels := []string{path, base + "/a", base}

	stop := make(chan struct{})
	reaped := make(chan int)
	go func() {
		n := 0
		defer func() { reaped <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			for _, p := range levels {
				if raw.Delete(p, -1) == nil {
					n++
				}
			}
		}
	}()
	m := dlock.NewMutex(c, path)
	var failed error
	for i := 0; i < 300 && failed == nil; i++ {
		l, err := m.Lock(ctxTimeout(t, 10*time.Second))
		if err != nil {
			failed = fmt.Errorf("lock %d while parents are reaped: %w", i, err)
			break
		}
		failed = l.Unlock(context.Background())
	}
	close(stop)
	if n := <-reaped; n == 0 {
		t.Fatal("the deleter never removed a parent: the test did not race")
	}
	if failed != nil {
		t.Fatal(failed)
	}
}

func TestInvalidLockPath(t *testing.T) {
	c := connect(t, testenv.ZKServers(t))
	for _, p := range []string{"", "relative", "/", "/a/", "/a//b", "/a/../b"} {
		if _, err := dlock.NewMutex(c, p).Lock(context.Background()); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
}

func TestQueueShowsHolderAndWaiters(t *testing.T) {
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	a := connect(t, servers, dlock.WithOwner("replica-a"))
	b := connect(t, servers, dlock.WithOwner("replica-b"))
	if q, _, err := a.Queue(ctxTimeout(t, 5*time.Second), path, 0); err != nil || len(q) != 0 {
		t.Fatalf("queue of an unused lock: %v, %v", q, err)
	}
	held, err := dlock.NewMutex(a, path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, err := dlock.NewMutex(b, path).Lock(ctxTimeout(t, 30*time.Second))
		if err != nil {
			t.Errorf("lock: %v", err)
			return
		}
		mustUnlock(t, l)
	}()
	waitNodes(t, rawConn(t), path, 2)
	q, _, err := b.Queue(ctxTimeout(t, 5*time.Second), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 2 || !q[0].Holder || q[1].Holder || q[0].Owner != "replica-a" || q[1].Owner != "replica-b" ||
		q[0].Token != held.Token() || q[1].Token <= q[0].Token || q[1].Seq <= q[0].Seq {
		t.Fatalf("queue %+v", q)
	}
	mustUnlock(t, held)
	<-done
}

// Every later holder's token is larger, also when the lock path was deleted (as ZooKeeper reaps an
// idle container) and created again: the new path's creation zxid is above every token of the old.
func TestTokensGrowAcrossARecreatedPath(t *testing.T) {
	c := connect(t, testenv.ZKServers(t))
	raw := rawConn(t)
	path := testenv.UniquePath(t)
	m := dlock.NewMutex(c, path)
	var last int64
	for round := range 4 {
		for range 3 { // a few holders on this incarnation, so that the sequence has grown
			l, err := m.Lock(ctxTimeout(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() <= last {
				t.Fatalf("round %d: token %d not above the previous %d", round, l.Token(), last)
			}
			last = l.Token()
			mustUnlock(t, l)
		}
		// The test server reaps an idle container every second, so it may have gone already;
		// either way the next round's Lock creates a new incarnation of the path.
		if err := raw.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("delete the empty lock path: %v", err)
		}
		if ok, _, err := raw.Exists(path); err != nil || ok {
			t.Fatalf("the lock path is still there (%v) after its deletion: %v", ok, err)
		}
	}
}

// Queue reads at most the entries asked for, one request each, and says how many there are.
func TestQueueIsBounded(t *testing.T) {
	c := connect(t, testenv.ZKServers(t))
	// The holder's client reads its own node in the background (the lease's watch), so the
	// reads are counted on a client of their own.
	reader := connect(t, testenv.ZKServers(t))
	raw := rawConn(t)
	path := testenv.UniquePath(t)
	held, err := dlock.NewMutex(c, path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range 119 {
		if _, err := raw.Create(path+"/waiter-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	getsBefore := reader.Stats().GetCalls
	q, total, err := reader.Queue(ctxTimeout(t, 10*time.Second), path, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 100 || total != 120 {
		t.Fatalf("%d entries of %d, want 100 of 120", len(q), total)
	}
	if gets := reader.Stats().GetCalls - getsBefore; gets != 100 {
		t.Fatalf("%d reads for 100 entries", gets)
	}
	if !q[0].Holder || q[0].Node != held.Node()[len(path)+1:] || q[1].Holder {
		t.Fatalf("holder not first, or a waiter marked holder: %+v %+v", q[0], q[1])
	}
	mustUnlock(t, held)
}
