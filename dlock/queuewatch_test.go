package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/internal/testenv"
)

// QueueChanged wakes on every move of the queue (a path made, a node joining, a node leaving),
// and not before.
func TestQueueChanged(t *testing.T) {
	c := connect(t, testenv.ZKServers(t))
	path := testenv.UniquePath(t)
	wait := func() chan error {
		got := make(chan error, 1)
		go func() { got <- c.QueueChanged(ctxTimeout(t, 10*time.Second), path) }()
		time.Sleep(200 * time.Millisecond) // the watch is set
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
	got := wait() // the path does not exist yet
	quiet(got)
	lease, err := dlock.NewMutex(c, path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	woke(got, "the path was made and a node joined")
	got = wait()
	quiet(got)
	mustUnlock(t, lease)
	woke(got, "the holder left")

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := c.QueueChanged(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with nothing moving: %v, want the context's end", err)
	}
}
