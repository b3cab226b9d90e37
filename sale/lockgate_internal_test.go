package sale

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// gateAsync runs a purchase's enter in the background and sends what it returned.
type gateResult struct {
	passed func(turn error)
	err    error
}

func gateAsync(g *lockGate, ctx context.Context, sku string, qty int64) <-chan gateResult {
	done := make(chan gateResult, 1)
	go func() {
		passed, err := g.enter(ctx, sku, qty)
		done <- gateResult{passed, err}
	}()
	return done
}

// waiting fails unless the purchase is still waiting beside the queue.
func stillWaiting(t *testing.T, r <-chan gateResult, what string) {
	t.Helper()
	select {
	case got := <-r:
		t.Fatalf("%s: let through (%v), want it waiting beside the queue", what, got.err)
	case <-time.After(50 * time.Millisecond):
	}
}

func letIn(t *testing.T, r <-chan gateResult, what string) func(error) {
	t.Helper()
	select {
	case got := <-r:
		if got.err != nil {
			t.Fatalf("%s: %v", what, got.err)
		}
		return got.passed
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting beside the queue", what)
	}
	return nil
}

func queuedUnits(g *lockGate, sku string) (queued, live int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.skus[sku]
	return s.queued, int64(s.live)
}

// With 2 units seen and 2 purchases queued here, a third waits beside the queue. A turn taken
// counts its unit as sold: the third is let through only when the sale says a unit is left. One
// whose wait ends takes no place, and the purchase behind it is let through if it fits. A restock
// of an amount not known has the stock read again: the waiting purchases go by what it shows.
func TestLockGateKeepsTheQueueWithinTheStock(t *testing.T) {
	g := newLockGate(time.Minute)
	reads := make(chan int64, 1)
	g.read = func(context.Context, string) (int64, error) { return <-reads, nil }
	ctx := context.Background()
	g.noteStock("G", 2)
	p1, err := g.enter(ctx, "G", 1)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := g.enter(ctx, "G", 1)
	if err != nil {
		t.Fatal(err)
	}
	third := gateAsync(g, ctx, "G", 1)
	stillWaiting(t, third, "a third purchase for the 2 units that 2 queued purchases cover")
	p1(nil) // its turn sold: 1 unit counted sold, 1 left for p2
	stillWaiting(t, third, "a third purchase while the second is queued for the last unit")
	g.noteStock("G", 2) // the turn's sale left 2 (a restock elsewhere): room for one more
	p3 := letIn(t, third, "a third purchase once a sale left 2 units")

	// A wait that ends: a purchase of 3 waits first, one of 1 behind it; the first gives up, and
	// the second fits (2 queued of 3 seen).
	g.noteStock("G", 3)
	gctx, cancel := context.WithCancelCause(ctx)
	big := gateAsync(g, gctx, "G", 3)
	stillWaiting(t, big, "a purchase of 3 behind 2 queued, 3 seen")
	small := gateAsync(g, ctx, "G", 1)
	stillWaiting(t, small, "a purchase of 1 behind one of 3 waiting (first come, first served)")
	gone := errors.New("sent away")
	cancel(gone)
	select {
	case r := <-big:
		if !errors.Is(r.err, gone) {
			t.Fatalf("the purchase whose wait ended: %v, want its wait's cause", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a purchase whose wait ended still waits")
	}
	p4 := letIn(t, small, "a purchase of 1 that fits once the one of 3 ahead gave up")
	if q, live := queuedUnits(g, "G"); q != 3 || live != 0 {
		t.Fatalf("queued %d, waiting %d; want 3 queued, none waiting", q, live)
	}
	// A restock of an amount not known: the stock is read, and lets the purchase of 5 through.
	waiting := gateAsync(g, ctx, "G", 5)
	stillWaiting(t, waiting, "a purchase of 5 behind 3 queued, 3 seen")
	g.noteStock("G", -1)
	stillWaiting(t, waiting, "a purchase of 5 behind 3 queued, the stock not read yet")
	reads <- 8
	p5 := letIn(t, waiting, "a purchase of 5 behind 3 queued after a restock, 8 read")
	for _, p := range []func(error){p2, p3, p4, p5} {
		p(errNoTurn)
	}
	if q, live := queuedUnits(g, "G"); q != 0 || live != 0 {
		t.Fatalf("after everyone passed: queued %d, waiting %d", q, live)
	}
}

// A stock seen longer than fresh ago (another replica may have restocked since) gates nobody,
// and is read again: a stall (a database failing over) must not leave the queue one purchase at
// a time after it. The read gates again by what it shows.
func TestLockGateTrustsOnlyAFreshStock(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	g := newLockGate(time.Second)
	g.now = func() time.Time { return now }
	reads := make(chan int64)
	g.read = func(context.Context, string) (int64, error) { return <-reads, nil }
	ctx := context.Background()
	g.noteStock("S", 1)
	p1, _ := g.enter(ctx, "S", 1)
	second := gateAsync(g, ctx, "S", 1)
	stillWaiting(t, second, "a second purchase for the 1 unit seen just now")
	g.mu.Lock()
	now = now.Add(2 * time.Second)
	g.mu.Unlock()
	p3, err := g.enter(ctx, "S", 1) // finds the stock stale: let through, and it is read
	if err != nil {
		t.Fatal(err)
	}
	letIn(t, second, "a second purchase once the stock seen went stale")(errNoTurn)
	reads <- 1 // 1 unit, which p1 and p3 queued for already
	time.Sleep(20 * time.Millisecond)
	stillWaiting(t, gateAsync(g, ctx, "S", 1), "a purchase behind 2 queued once the read showed 1")
	p1(errNoTurn)
	p3(errNoTurn)
}

// A burst at a sale's start, before anything here has seen the stock: one purchase queues while
// the stock is read, and then as many as it covers. Before, the gate let the whole burst through
// to ZooKeeper (on the compose stack, about 2,000 nodes for 100 units, and the sessions lost).
func TestLockGateReadsAStockNotKnownBeforeItLetsABurstThrough(t *testing.T) {
	g := newLockGate(time.Minute)
	reads := make(chan int64)
	asked := make(chan string, 8)
	g.read = func(_ context.Context, sku string) (int64, error) { asked <- sku; return <-reads, nil }
	ctx := context.Background()
	first, err := g.enter(ctx, "B", 1)
	if err != nil {
		t.Fatal(err)
	}
	var burst []<-chan gateResult
	for i := range 10 { // one after another: first come, first served
		burst = append(burst, gateAsync(g, ctx, "B", 1))
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if _, live := queuedUnits(g, "B"); live == int64(i+1) {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("purchase %d of a burst: %d waiting beside the queue, want %d", i+2, live, i+1)
			}
		}
	}
	for i, r := range burst {
		stillWaiting(t, r, fmt.Sprintf("purchase %d of a burst, the stock not known", i+2))
	}
	if sku := <-asked; sku != "B" {
		t.Fatalf("read %q, want B", sku)
	}
	reads <- 4 // 4 units: the first and 3 more queue, the other 7 wait beside the queue
	var passed []func(error)
	for i, r := range burst[:3] {
		passed = append(passed, letIn(t, r, fmt.Sprintf("purchase %d of a burst, 4 read", i+2)))
	}
	for i, r := range burst[3:] {
		stillWaiting(t, r, fmt.Sprintf("purchase %d of a burst, 4 read and 4 queued", i+5))
	}
	if q, live := queuedUnits(g, "B"); q != 4 || live != 7 {
		t.Fatalf("queued %d, waiting %d; want 4 queued, 7 waiting", q, live)
	}
	// A turn that sold nothing gives its place to the first purchase waiting.
	first(errNoTurn)
	letIn(t, burst[3], "purchase 5 once the first's turn sold nothing")(errNoTurn)
	for _, p := range passed {
		p(errNoTurn)
	}
	if len(asked) != 0 {
		t.Fatalf("%d more reads of a stock known and fresh", len(asked))
	}
}

// First come, first served: a purchase that fits does not pass one that waits.
func TestLockGateIsFirstComeFirstServed(t *testing.T) {
	g := newLockGate(time.Minute)
	ctx := context.Background()
	g.noteStock("F", 3)
	p1, _ := g.enter(ctx, "F", 1)
	big := gateAsync(g, ctx, "F", 3)
	stillWaiting(t, big, "a purchase of 3 behind 1 queued, 3 seen")
	small := gateAsync(g, ctx, "F", 1)
	stillWaiting(t, small, "a purchase of 1 behind a waiting purchase of 3")
	p1(errNoTurn)
	letIn(t, big, "the purchase of 3 once the queue is empty")(errNoTurn)
	letIn(t, small, "the purchase of 1 after it")(errNoTurn)
}

// errNoTurn ends a purchase's pass of the gate without a sale (a lock given up, a rollback).
var errNoTurn = errors.New("no sale")

// A turn that sells nothing (its transaction rolled back, its lock given up) leaves the stock as
// it was: the gate lets as many queue as before it, where it counted the units sold and let one
// purchase at a time through until a sale corrected it. A turn whose COMMIT went unanswered may
// have sold, and counts so; one that found the stock short of its units leaves fewer than them.
func TestLockGateCountsAFailedTurnAsNothingSold(t *testing.T) {
	g := newLockGate(time.Minute)
	ctx := context.Background()
	g.noteStock("R", 2)
	p1, _ := g.enter(ctx, "R", 1)
	p2, _ := g.enter(ctx, "R", 1)
	p1(fmt.Errorf("the sale: %w", errNoTurn)) // its turn rolled back: nothing sold
	third := gateAsync(g, ctx, "R", 1)
	p3 := letIn(t, third, "a third purchase of the 2 units, 1 queued, after the first's turn sold nothing")
	p2(fmt.Errorf("commit: %w", errOutcomeUnknown)) // may have sold: 1 left for p3
	stillWaiting(t, gateAsync(g, ctx, "R", 1), "a purchase behind the last unit's, after a turn that may have sold")
	p3(inventory.ErrOutOfStock) // found none left under the lock (a sale elsewhere)
	g.mu.Lock()
	stock := g.skus["R"].stock
	g.mu.Unlock()
	if stock != 0 {
		t.Fatalf("stock counted %d after a purchase of 1 found it short; want 0", stock)
	}
}

// A read of the stock that fails leaves it not known: one purchase at a time queues, each let
// through as the turn ahead ends, and the read is tried again after gateReadTimeout.
func TestLockGateWithoutAStockReadQueuesOneAtATime(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	g := newLockGate(time.Minute)
	g.now = func() time.Time { return now }
	reads := make(chan error)
	g.read = func(context.Context, string) (int64, error) { return 0, <-reads }
	ctx := context.Background()
	first, _ := g.enter(ctx, "U", 1)
	second := gateAsync(g, ctx, "U", 1)
	reads <- errors.New("the database is down")
	stillWaiting(t, second, "a second purchase after the read failed")
	first(errNoTurn)
	third := gateAsync(g, ctx, "U", 1)
	p2 := letIn(t, second, "the second purchase once the first's turn ended")
	stillWaiting(t, third, "a third purchase behind the second, the stock not known")
	g.mu.Lock()
	now = now.Add(2 * gateReadTimeout)
	g.mu.Unlock()
	p2(errNoTurn) // its end begins the read again
	select {
	case reads <- nil: // read again: 0 units, which the gate now knows
	case <-time.After(5 * time.Second):
		t.Fatal("the stock was not read again after gateReadTimeout")
	}
	letIn(t, third, "the third purchase, alone in the queue")(errNoTurn)
}
