package order

import (
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
		if _, err := a.enter("COLD", ModeZK, t0); err != nil {
			t.Fatalf("the burst's own purchases: %v", err)
		}
	}
	if _, err := a.enter("COLD", ModeZK, t0.Add(300*time.Millisecond)); err != nil {
		t.Fatalf("a purchase 300 ms into a cold burst of 67: %v; nothing measured says it cannot be served within 15 s", err)
	}
}

// A stall is not a queue: three purchases in flight that stopped ending for 3 s (a killed
// holder's node waiting for its session to end) do not refuse a fourth, whose wait LOCK_TIMEOUT
// bounds; a queue foreseen past the budget does.
func TestAdmissionRefusesAQueueNotAStall(t *testing.T) {
	a := newAdmission(time.Second)
	for range 5 {
		leave, err := a.enter("STALL", ModeZK, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		leave(true)
	}
	for range 3 {
		if _, err := a.enter("STALL", ModeZK, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.enter("STALL", ModeZK, time.Now().Add(3*time.Second)); err != nil {
		t.Fatalf("3 s into a stall of 3 purchases: %v, want admitted", err)
	}
	f := a.skus["zk/STALL"]
	a.mu.Lock()
	f.turn = 100 * time.Millisecond
	a.mu.Unlock()
	for range 7 {
		_, _ = a.enter("STALL", ModeZK, time.Now())
	}
	_, err := a.enter("STALL", ModeZK, time.Now())
	busy, ok := asSKUBusy(err)
	if !ok {
		t.Fatalf("11 ahead at 100 ms a turn, budget 1 s: %v, want sku_busy", err)
	}
	if s := busy.retryAfterSeconds(); s < 1 {
		t.Errorf("Retry-After %d", s)
	}
}
