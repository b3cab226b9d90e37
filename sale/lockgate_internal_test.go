package sale

import (
	"context"
	"errors"
	"testing"
	"time"
)

// entered reports whether a purchase's enter returned within a short wait, and its result.
func enterAsync(g *lockGate, ctx context.Context, sku string, qty int64) <-chan error {
	done := make(chan error, 1)
	go func() {
		passed, err := g.enter(ctx, sku, qty)
		if err == nil {
			defer passed()
			<-ctx.Done() // hold the place in the queue until the test lets it go
		}
		done <- err
	}()
	return done
}

// With 2 units left and 2 purchases queued here, a third waits beside the queue; it is let
// through when one of the queued passes the lock; it is let through at once when the stock is
// not known; and one whose wait ends takes nothing and leaves no trace.
func TestLockGateKeepsTheQueueWithinTheStock(t *testing.T) {
	g := newLockGate()
	ctx := context.Background()
	p1, err := g.enter(ctx, "G", 1)
	if err != nil {
		t.Fatal(err)
	}
	g.noteStock("G", 2)
	p2, err := g.enter(ctx, "G", 1)
	if err != nil {
		t.Fatal(err)
	}
	third := make(chan func(), 1)
	go func() {
		passed, err := g.enter(ctx, "G", 1)
		if err != nil {
			t.Errorf("third: %v", err)
		}
		third <- passed
	}()
	select {
	case <-third:
		t.Fatal("a third purchase was let through to a queue that holds the 2 units left")
	case <-time.After(100 * time.Millisecond):
	}
	// A fourth that gives up its wait takes no place.
	gctx, cancel := context.WithCancelCause(ctx)
	fourth := enterAsync(g, gctx, "G", 1)
	time.Sleep(20 * time.Millisecond)
	gone := errors.New("sent away")
	cancel(gone)
	if err := <-fourth; !errors.Is(err, gone) {
		t.Fatalf("fourth: %v, want its wait's cause", err)
	}
	p1()
	p3 := <-third
	p2()
	p3()
	g.mu.Lock()
	idle := *g.skus["G"]
	g.mu.Unlock()
	if idle.queued != 0 || idle.live != 0 || idle.stock != 2 {
		t.Fatalf("after everyone passed: %+v, want nothing queued or waiting and the stock seen kept", idle)
	}
	// A stock not known (a restock of an amount not known) lets everyone through.
	q1, _ := g.enter(ctx, "G", 1)
	g.noteStock("G", 0)
	waiting := enterAsync(g, ctx, "G", 5)
	time.Sleep(20 * time.Millisecond)
	g.noteStock("G", -1)
	select {
	case err := <-waiting:
		t.Fatalf("let through, then: %v", err) // it holds its place until ctx ends: no answer yet
	case <-time.After(50 * time.Millisecond):
	}
	g.mu.Lock()
	queued := g.skus["G"].queued
	g.mu.Unlock()
	if queued != 6 {
		t.Fatalf("queued units %d after a restock of an amount not known, want 6 (all let through)", queued)
	}
	q1()
}

// First come, first served: a purchase that fits does not pass one that waits.
func TestLockGateIsFirstComeFirstServed(t *testing.T) {
	g := newLockGate()
	ctx := context.Background()
	p1, _ := g.enter(ctx, "F", 1)
	g.noteStock("F", 3)
	big := make(chan func(), 1)
	go func() { passed, _ := g.enter(ctx, "F", 3); big <- passed }()
	time.Sleep(20 * time.Millisecond)
	small := make(chan func(), 1)
	go func() { passed, _ := g.enter(ctx, "F", 1); small <- passed }()
	select {
	case <-small:
		t.Fatal("a purchase of 1 passed a purchase of 3 waiting before it")
	case <-time.After(50 * time.Millisecond):
	}
	p1()
	(<-big)()
	(<-small)()
}
