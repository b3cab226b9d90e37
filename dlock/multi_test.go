package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// Many clients, each in its own session, lock overlapping sets of paths given in random orders.
// Taken one by one in the given order this deadlocks at once; LockAll's canonical order must let
// every one of them finish, and no path may ever have two holders.
func TestLockAllHasNoDeadlock(t *testing.T) {
	const clients, rounds, npaths = 6, 12, 5
	servers := testenv.ZKServers(t)
	base := testenv.UniquePath(t)
	paths := make([]string, npaths)
	inside := make([]exclusion, npaths)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/p%d", base, i)
	}
	ctx := ctxTimeout(t, 2*time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := connect(t, servers)
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				picked := rng.Perm(npaths)[:2+rng.IntN(2)] // 2 or 3 paths, in a random order
				ms := make([]*dlock.Mutex, len(picked))
				for j, p := range picked {
					ms[j] = dlock.NewMutex(c, paths[p])
				}
				s, err := dlock.LockAll(ctx, ms...)
				if err != nil {
					errs <- err
					return
				}
				for _, p := range picked {
					inside[p].enter()
					if s.Token(paths[p]) == 0 {
						errs <- fmt.Errorf("no token for %s", paths[p])
					}
				}
				time.Sleep(time.Millisecond)
				for _, p := range picked {
					inside[p].leave()
				}
				if err := s.Unlock(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	raw := rawConn(t)
	for i, p := range paths {
		if n := inside[i].overlaps.Load(); n != 0 {
			t.Errorf("%s had two holders %d times", p, n)
		}
		if nodes := lockNodes(t, raw, p); len(nodes) != 0 {
			t.Errorf("%s: nodes left behind: %v", p, nodes)
		}
	}
}

// All or nothing: when one lock cannot be had before ctx ends, the ones already taken are given
// back and no node is left.
func TestLockAllGivesBackOnFailure(t *testing.T) {
	servers := testenv.ZKServers(t)
	base := testenv.UniquePath(t)
	a, b := base+"/a", base+"/b"
	held, err := dlock.NewMutex(connect(t, servers), b).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, servers)
	_, err = dlock.LockAll(ctxTimeout(t, 500*time.Millisecond), dlock.NewMutex(c, b), dlock.NewMutex(c, a))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock all with b held: %v, want DeadlineExceeded", err)
	}
	raw := rawConn(t)
	if nodes := lockNodes(t, raw, a); len(nodes) != 0 {
		t.Fatalf("a kept nodes after the failure: %v", nodes)
	}
	if nodes := lockNodes(t, raw, b); len(nodes) != 1 {
		t.Fatalf("b's queue %v: the waiter's node was left", nodes)
	}
	mustUnlock(t, held)
	if _, err := dlock.LockAll(ctxTimeout(t, time.Second), dlock.NewMutex(c, a), dlock.NewMutex(c, a)); err == nil {
		t.Fatal("lock all with a path given twice succeeded")
	}
	if _, err := dlock.LockAll(ctxTimeout(t, time.Second)); err == nil {
		t.Fatal("lock all of nothing succeeded")
	}
}

// One lost lease closes the set's Lost and cancels its context; the set's context re-enters each.
func TestLockAllLostAndReentry(t *testing.T) {
	servers := testenv.ZKServers(t)
	base := testenv.UniquePath(t)
	c := connect(t, servers)
	ma, mb := dlock.NewMutex(c, base+"/a"), dlock.NewMutex(c, base+"/b")
	s, err := dlock.LockAll(ctxTimeout(t, 5*time.Second), mb, ma)
	if err != nil {
		t.Fatal(err)
	}
	ls := s.Leases()
	if len(ls) != 2 || ls[0].Token() != s.Token(base+"/a") || ls[1].Token() != s.Token(base+"/b") {
		t.Fatalf("leases not in path order with their tokens")
	}
	inner, err := mb.Lock(s.Context())
	if err != nil || inner.Node() != ls[1].Node() {
		t.Fatalf("re-entering b through the set's context: %v", err)
	}
	mustUnlock(t, inner)
	if err := rawConn(t).Delete(ls[0].Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost did not close when one lease was lost")
	}
	if !errors.Is(context.Cause(s.Context()), dlock.ErrLost) {
		t.Fatalf("context cause %v, want ErrLost", context.Cause(s.Context()))
	}
	if err := s.Unlock(context.Background()); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("unlock of a set with a lost lease: %v, want ErrLost", err)
	}
}
