package dlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/tcpproxy"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

func TestLeaseContextEndsWithTheLease(t *testing.T) {
	c := connect(t, testenv.ZKServers(t))
	raw := rawConn(t)
	path := testenv.UniquePath(t)
	m := dlock.NewMutex(c, path)

	l, err := m.Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Context().Err(); err != nil {
		t.Fatalf("context of a held lease: %v", err)
	}
	mustUnlock(t, l)
	if l.Context().Err() == nil {
		t.Fatal("context still open after Unlock")
	}
	if errors.Is(context.Cause(l.Context()), dlock.ErrLost) {
		t.Fatalf("unlock gave the context a lost cause: %v", context.Cause(l.Context()))
	}

	if l, err = m.Lock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(l.Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("context not cancelled after the node was deleted by someone else")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, dlock.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", cause)
	}
}

// The listener sees what Curator's ConnectionStateListener would: connected, suspended while the
// connection is down, reconnected when it is back with the session, lost when the session can no
// longer be trusted, and closed last.
func TestStateListener(t *testing.T) {
	servers := testenv.ZKServers(t)
	proxy := tcpproxy.New(t, servers[0])
	var mu sync.Mutex
	var seen []dlock.State
	got := func() []dlock.State {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
	// 4 s: a reconnection after the first cut must come well before the deadline (at least
	// 0.9 × 4 − 4/3 ≈ 2.3 s after the cut), or the listener rightly hears "lost" too.
	c := connect(t, []string{proxy.Addr()}, dlock.WithSessionTimeout(4*time.Second), dlock.WithStateListener(func(s dlock.State) {
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
	}))
	if c.SessionTimeout() != 4*time.Second {
		t.Fatalf("session timeout %v", c.SessionTimeout())
	}
	wait := func(want ...dlock.State) {
		t.Helper()
		eventually(t, 20*time.Second, "states "+stateNames(want), func() bool { return slices.Equal(got(), want) })
	}
	wait(dlock.StateConnected)

	proxy.Cut()
	wait(dlock.StateConnected, dlock.StateSuspended)
	proxy.Restore()
	wait(dlock.StateConnected, dlock.StateSuspended, dlock.StateReconnected)

	proxy.Stall() // silent past the deadline: the session's leases are lost
	wait(dlock.StateConnected, dlock.StateSuspended, dlock.StateReconnected, dlock.StateSuspended, dlock.StateLost)
	proxy.Resume()
	wait(dlock.StateConnected, dlock.StateSuspended, dlock.StateReconnected, dlock.StateSuspended, dlock.StateLost,
		dlock.StateReconnected)
	if _, err := dlock.NewMutex(c, testenv.UniquePath(t)).Lock(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("lock after reconnecting: %v", err)
	}
	_ = c.Close()
	wait(dlock.StateConnected, dlock.StateSuspended, dlock.StateReconnected, dlock.StateSuspended, dlock.StateLost,
		dlock.StateReconnected, dlock.StateClosed)
}

func stateNames(ss []dlock.State) string {
	var out string
	for _, s := range ss {
		out += s.String() + " "
	}
	return out
}

// Reentrancy is through the context: a context carrying a lease of the path re-enters at once,
// anything else queues, even from the same Client.
func TestReentrancyThroughTheContext(t *testing.T) {
	servers := testenv.ZKServers(t)
	c := connect(t, servers)

	raw := rawConn(t)
	path := testenv.UniquePath(t)
	other := dlock.NewMutex(connect(t, servers), path)
	m := dlock.NewMutex(c, path)

	outer, err := m.Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(outer.Context(), 5*time.Second)
	defer cancel()
	inner, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("re-entering: %v", err)
	}
	if inner.Node() != outer.Node() || inner.Token() != outer.Token() {
		t.Fatalf("re-entry got node %s token %d, want the holding's %s %d", inner.Node(), inner.Token(), outer.Node(), outer.Token())
	}
	if n := lockNodes(t, raw, path); len(n) != 1 {
		t.Fatalf("re-entry created a node: %v", n)
	}
	// The same Client without the lease's context queues behind it.
	if _, err := m.Lock(ctxTimeout(t, 300*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock from the same client without the context: %v, want it to wait", err)
	}
	mustUnlock(t, inner)
	if inner.Context().Err() == nil {
		t.Fatal("inner lease's context still open after its Unlock")
	}
	if outer.Context().Err() != nil {
		t.Fatal("the outer lease's context ended with the inner one")
	}
	if _, err := other.TryLock(ctxTimeout(t, 5*time.Second)); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("trylock while the outer lease holds: %v, want ErrLocked", err)
	}
	mustUnlock(t, outer)
	l, err := other.TryLock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("trylock after the last unlock: %v", err)
	}
	mustUnlock(t, l)

	// A read lease cannot become a write lease; a write lease covers reads.
	rw := dlock.NewRWMutex(c, testenv.UniquePath(t))
	r, err := rw.RLock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Lock(r.Context()); !errors.Is(err, dlock.ErrDeadlock) {
		t.Fatalf("write lock under a read lease: %v, want ErrDeadlock", err)
	}
	mustUnlock(t, r)
	w, err := rw.Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r, err = rw.RLock(w.Context())
	if err != nil || r.Node() != w.Node() {
		t.Fatalf("read under a write lease: %v", err)
	}
	mustUnlock(t, r)
	mustUnlock(t, w)
}

func TestRWMutexTryLocks(t *testing.T) {
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	a := dlock.NewRWMutex(connect(t, servers), path)
	b := dlock.NewRWMutex(connect(t, servers), path)
	raw := rawConn(t)

	r, err := a.RLock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.TryRLock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("tryrlock beside a reader: %v", err)
	}
	if _, err := b.TryLock(ctxTimeout(t, 5*time.Second)); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("trylock beside readers: %v, want ErrLocked", err)
	}
	if n := lockNodes(t, raw, path); len(n) != 2 {
		t.Fatalf("queue %v after a refused trylock: it left a node", n)
	}
	mustUnlock(t, r)
	mustUnlock(t, r2)

	w, err := a.TryLock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryRLock(ctxTimeout(t, 5*time.Second)); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("tryrlock beside a writer: %v, want ErrLocked", err)
	}
	if n := lockNodes(t, raw, path); len(n) != 1 {
		t.Fatalf("queue %v after a refused tryrlock: it left a node", n)
	}
	mustUnlock(t, w)
}
