package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/internal/testenv"
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
		go func() { got <- c.QueueChanged(ctxTimeout(t, 10*time.Second), path) }()
		// A change before the watch is set would not wake it. wchp does not list child watches,
		// so: once the watch's request is issued, a read on the same session returns only after
		// the server has answered it (a session's requests are answered in order).
		issued := c.Stats().ChildrenCalls
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
