package dlock_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// QueueChanged wakes on every move of the queue (a node joining, a node leaving), and not before.
func TestQueueChanged(t *testing.T) {
	servers := testenv.ZKServers(t)
	c := connect(t, servers)
	other := connect(t, servers)
	path := testenv.UniquePath(t)
	holder, err := dlock.NewMutex(c, path).Lock(ctxTimeout(t, 5*time.Second)) // keeps the path there
	if err != nil {
		t.Fatal(err)
	}
	wait := func() chan error {
		got := make(chan error, 1)
		issued := c.Stats().ChildrenCalls // before the call: it may issue its request at once
		go func() { got <- c.QueueChanged(ctxTimeout(t, 10*time.Second), path) }()
		// A change before the watch is set would not wake it. wchp does not list child watches,
		// so: once the watch's request is issued, a read on the same session returns only after
		// the server has answered it (a session's requests are answered in order).
		eventually(t, 5*time.Second, "the queue watch to be requested", func() bool { return c.Stats().ChildrenCalls > issued })
		if _, _, err := c.Queue(ctxTimeout(t, 5*time.Second), path, 1); err != nil {
			t.Fatal(err)
		}
		return got
	}
	quiet := func(got chan error) {
		select {
		case err := <-got:
			t.Fatalf("woke with nothing changed: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
	}
	woke := func(got chan error, what string) {
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no wake-up", what)
		}
	}
	got := wait()
	quiet(got)
	waiter := make(chan *dlock.Lease, 1)
	go func() {
		l, err := dlock.NewMutex(other, path).Lock(ctxTimeout(t, 10*time.Second))
		if err != nil {
			t.Error(err)
		}
		waiter <- l
	}()
	woke(got, "a waiter joined")
	got = wait()
	quiet(got)
	mustUnlock(t, holder)
	woke(got, "the holder left")
	mustUnlock(t, <-waiter)

	// A path that does not exist is not watched itself: waiting on it leaves no watch behind.
	missing := testenv.UniquePath(t) + "-never"
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := c.QueueChanged(ctx, missing); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if n := testenv.WatchesUnder(t, servers[0], missing); n != 0 {
		t.Fatalf("%d watches left on a path that does not exist", n)
	}
}

// QueueChanged calls on one path share one ZooKeeper watch: a thousand calls given up on a queue
// that never moves (a live page opened and closed again and again) set one watch, not a thousand
// that go-zookeeper keeps until the queue moves; callers waiting together all wake on one change;
// and the next call after it sets a new watch.
func TestQueueChangedSharesOneWatch(t *testing.T) {
	servers := testenv.ZKServers(t)
	c := connect(t, servers)
	other := connect(t, servers)
	path := testenv.UniquePath(t)
	holder, err := dlock.NewMutex(other, path).Lock(ctxTimeout(t, 5*time.Second)) // keeps the path there
	if err != nil {
		t.Fatal(err)
	}
	defer mustUnlock(t, holder)
	goroutines := runtime.NumGoroutine()
	before := c.Stats().ChildrenCalls

	giveUp := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		if err := c.QueueChanged(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("QueueChanged on a queue that does not move: %v, want the deadline", err)
		}
	}
	var wg sync.WaitGroup
	for range 500 { // at once
		wg.Add(1)
		go func() { defer wg.Done(); giveUp() }()
	}
	wg.Wait()
	for range 500 { // one after another
		giveUp()
	}
	if n := c.Stats().ChildrenCalls - before; n != 1 {
		t.Fatalf("1,000 abandoned QueueChanged calls issued %d children watches, want 1", n)
	}
	eventually(t, 5*time.Second, "the abandoned calls' goroutines to end", func() bool {
		return runtime.NumGoroutine() <= goroutines+2 // the one waiting for the shared watch
	})

	// The shared watch is answered: a read on the same session comes back after it.
	if _, _, err := c.Queue(ctxTimeout(t, 5*time.Second), path, 1); err != nil {
		t.Fatal(err)
	}
	const waiters = 50
	woke := make(chan error, waiters)
	var started sync.WaitGroup
	for range waiters {
		started.Add(1)
		go func() {
			started.Done()
			woke <- c.QueueChanged(ctxTimeout(t, 10*time.Second), path)
		}()
	}
	started.Wait()
	time.Sleep(200 * time.Millisecond) // joining a pending watch takes no request: let them join
	queued := make(chan *dlock.Lease, 1)
	go func() {
		l, err := dlock.NewMutex(other, path).Lock(ctxTimeout(t, 10*time.Second)) // the queue moves
		if err != nil {
			t.Error(err)
		}
		queued <- l
	}()
	for range waiters {
		if err := <-woke; err != nil {
			t.Fatalf("a waiter did not wake on the change: %v", err)
		}
	}
	if n := c.Stats().ChildrenCalls - before - 2; n != 0 { // less the shared watch and the Queue read
		t.Fatalf("%d waiters issued %d more children watches, want none", waiters, n)
	}
	// The watch fired; the next call sets a new one.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_ = c.QueueChanged(ctx, path)
	eventually(t, 5*time.Second, "the call after the change to set a new watch", func() bool {
		return c.Stats().ChildrenCalls-before-2 == 1
	})
	mustUnlock(t, holder)
	mustUnlock(t, <-queued)
}
