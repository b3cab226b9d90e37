package sale

import (
	"context"
	"testing"
	"time"
)

// A burst at a cold SKU whose first purchase is slow to end (a cold lock path, a loaded machine)
// says nothing of how long each turn takes: the time since the SKU became busy is at most one
// turn's worth, not every waiter's. 67 purchases in flight for 300 ms, none ended, fit a 15 s
// budget unless each turn takes 224 ms: the next one is admitted.
func TestAdmissionColdBurstIsNotRefused(t *testing.T) {
	a := newAdmission(15 * time.Second)
	t0 := time.Now()
	for range 67 {
		if _, err := a.enter("COLD", ModeZK, 1, t0); err != nil {
			t.Fatalf("the burst's own purchases: %v", err)
		}
	}
	if _, err := a.enter("COLD", ModeZK, 1, t0.Add(300*time.Millisecond)); err != nil {
		t.Fatalf("a purchase 300 ms into a cold burst of 67: %v; nothing measured says it cannot be served within 15 s", err)
	}
}

// A stall is not a queue: three purchases in flight that stopped ending for 3 s (a killed
// holder's node waiting for its session to end) do not refuse a fourth, whose wait LOCK_TIMEOUT
// bounds; a queue foreseen past the budget does.
func TestAdmissionRefusesAQueueNotAStall(t *testing.T) {
	a := newAdmission(time.Second)
	for range 5 {
		leave, err := a.enter("STALL", ModeZK, 1, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		leave(turned)
	}
	for range 3 {
		if _, err := a.enter("STALL", ModeZK, 1, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.enter("STALL", ModeZK, 1, time.Now().Add(3*time.Second)); err != nil {
		t.Fatalf("3 s into a stall of 3 purchases: %v, want admitted", err)
	}
	f := a.skus["zk/STALL"]
	a.mu.Lock()
	f.turn = 100 * time.Millisecond
	a.mu.Unlock()
	for range 7 {
		_, _ = a.enter("STALL", ModeZK, 1, time.Now())
	}
	_, err := a.enter("STALL", ModeZK, 1, time.Now())
	busy, ok := asSKUBusy(err)
	if !ok {
		t.Fatalf("11 ahead at 100 ms a turn, budget 1 s: %v, want sku_busy", err)
	}
	if s := busy.retryAfterSeconds(); s < 1 {
		t.Errorf("Retry-After %d", s)
	}
}

// A stall, once it ends, is not learnt as a turn: the queue that waited through it is admitted as
// before, where the stall's gap counted as a turn (and its waiters' in the scale) made every
// newcomer look a queue of stalls (1,276 of 1,500 buyers refused in the compose test after a
// replica was killed). Long gaps in a row are the new pace, and are learnt.
func TestAdmissionForgetsAStallOnceItEnds(t *testing.T) {
	a := newAdmission(2500 * time.Millisecond)
	var leaves []func(turnEnd)
	enter := func(at time.Time) error {
		leave, err := a.enter("AFTER", ModeZK, 1, at)
		if err == nil {
			leaves = append(leaves, leave)
		}
		return err
	}
	flow := func() *skuFlow { return a.skus["zk/AFTER"] } // under a.mu
	turnNow := func() time.Duration { a.mu.Lock(); defer a.mu.Unlock(); return flow().turn }
	for range 40 { // a steady queue of 10 ms turns
		if err := enter(time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		leaves[0](turned)
		leaves = leaves[1:]
	}
	for range 30 { // 30 in flight, as the compose test's clients, come as the stall began
		if err := enter(time.Now().Add(-4 * time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	a.mu.Lock()
	turn, scale := flow().turn, flow().scaleAt(time.Now())
	flow().since = time.Now().Add(-4 * time.Second) // the holder killed: its node stayed a session
	a.mu.Unlock()
	for _, leave := range leaves { // the stall ends; the queue behind it goes at the usual pace
		leave(turned)
		time.Sleep(10 * time.Millisecond)
	}
	leaves = nil
	if got := turnNow(); got > 3*turn {
		t.Fatalf("turn %v after the stall, %v before: the stall was learnt as a turn", got, turn)
	}
	// Nor is it learnt in the scale: the queue that waited through it waited seconds for a few
	// turns' foreseen wait, which says how long the stall was, not how good the estimate is.
	a.mu.Lock()
	after := flow().scaleAt(time.Now())
	a.mu.Unlock()
	if after > scale*1.25 {
		t.Fatalf("scale %.2f after the stall, %.2f before: its waiters' waits were learnt", after, scale)
	}
	for i := range 30 {
		if err := enter(time.Now()); err != nil {
			t.Fatalf("newcomer %d after the stall: %v, want admitted (30 × %v within 2.5 s)", i, err, turn)
		}
	}
	// The new pace: long gaps in a row are learnt.
	before := turnNow()
	for range stallsInARowLearnt + 2 {
		a.mu.Lock()
		flow().since = time.Now().Add(-2 * time.Second)
		a.mu.Unlock()
		leaves[0](turned)
		leaves = leaves[1:]
	}
	if got := turnNow(); got <= 3*before {
		t.Errorf("turn %v after %d gaps of 2 s in a row, %v before: the new pace was not learnt", got, stallsInARowLearnt+2, before)
	}
}

// zk-batch's purchases end in bursts, a batch's time apart: the first gap of each burst, many
// turns long, is the pace, not a stall. Taken for stalls (the review found it), every burst's was
// dropped, the turn learnt only the bursts' microseconds, and nothing was refused again.
func TestAdmissionLearnsBurstsAsTheirPace(t *testing.T) {
	a := newAdmission(2500 * time.Millisecond)
	var leaves []func(turnEnd)
	for range 200 {
		leave, err := a.enter("BURST", ModeZKBatch, 1, time.Now())
		if err != nil {
			break
		}
		leaves = append(leaves, leave)
	}
	for len(leaves) >= 16 { // batches of 16, 20 ms apart
		time.Sleep(20 * time.Millisecond)
		for _, leave := range leaves[:16] {
			leave(turned)
		}
		leaves = leaves[16:]
	}
	a.mu.Lock()
	turn := a.skus["zk-batch/BURST"].turn
	a.mu.Unlock()
	if turn < 200*time.Microsecond { // 20 ms / 16 = 1.25 ms a purchase
		t.Fatalf("turn %v for batches of 16 every 20 ms: the bursts' gaps were dropped as stalls", turn)
	}
}

// turned is the end of a purchase that had its turn, the stock it left unknown.
var turned = turnEnd{turned: true, left: -1}

// The stock a read before the queue shows is what admission foresees by, restocked elsewhere or
// not: the read's own clearing of the suspicion is no restock of an amount unknown.
func TestSoldOutTellsAdmissionTheStockItRead(t *testing.T) {
	so := newSoldOut(func(context.Context, []string) (map[string]int64, error) {
		return map[string]int64{"READ": 5}, nil
	}, nil, false)
	var told []int64
	so.seen = func(sku string, stock int64) { told = append(told, stock) }
	so.noteShort("READ")
	if so.shortBeforeQueue(context.Background(), "READ", 1) {
		t.Fatal("5 units read, 1 asked: short")
	}
	if len(told) == 0 || told[len(told)-1] != 5 {
		t.Fatalf("admission was told %v; want the 5 read, last", told)
	}
}

// A sell-out sends this replica's queue away (each waiter answered out_of_stock, none in flight
// here), while the other replicas' nodes still stand in the fleet's queue. A buyer arriving then is
// answered by the sell-out within a turn and a poll: the stock seen here says so, whatever the
// queue's length. TestSustainedLoad drew 15-53 sku_busy so at its sell-out once a client's key was
// held before admission (its look-ups before the lock skipped, buyers reached the queue sooner).
func TestAdmissionAtASellOutSeenHereWithNothingInFlight(t *testing.T) {
	a := newAdmission(2500 * time.Millisecond)
	contenders := 1
	a.fleet = func(string, LockMode) (queueView, bool) {
		return queueView{contenders: contenders, turn: 20 * time.Millisecond}, true
	}
	t0 := time.Now()
	leave, err := a.enter("SELLOUT", ModeZK, 1, t0)
	if err != nil {
		t.Fatalf("the first buyer, the queue empty: %v", err)
	}
	leave(turnEnd{left: 0}) // sent away by the sell-out: the stock it saw, 0
	contenders = 200        // 4 s of queue: the other replicas' waiters, not yet sent away
	if _, err := a.enter("SELLOUT", ModeZK, 1, t0.Add(10*time.Millisecond)); err != nil {
		t.Fatalf("a buyer 10 ms after this replica saw the stock at 0, nothing in flight here, 200 in the fleet's queue: %v; want admitted (the sell-out answers it within a turn and a poll)", err)
	}
	// A stock seen above 0 with nothing in flight here lasts a turn per unit: a big purchase is
	// not foreseen to sell it out in a turn or two while the fleet's waiters buy their own.
	b := newAdmission(2500 * time.Millisecond)
	contenders = 1
	b.fleet = a.fleet
	leave, err = b.enter("STOCKED", ModeZK, 1, t0)
	if err != nil {
		t.Fatal(err)
	}
	leave(turnEnd{turned: true, left: 500})
	contenders = 200
	for _, qty := range []int64{1, 100, 1000} {
		if _, err := b.enter("STOCKED", ModeZK, qty, t0.Add(10*time.Millisecond)); !isSKUBusy(err) {
			t.Errorf("a purchase of %d, 500 units seen, nothing in flight here, 4 s of the fleet's queue: %v; want sku_busy", qty, err)
		}
	}
}
