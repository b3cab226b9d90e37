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

// A SKU whose purchases in flight stopped ending refuses newcomers once the stall alone passes the
// budget, and admits again as soon as the stalled purchases end: it is never refused for good.
func TestAdmissionStallRefusesThenRecovers(t *testing.T) {
	a := newAdmission(time.Second)
	// A few quick turns first: a stall is judged against turns measured.
	for range 5 {
		leave, err := a.enter("STALL", ModeZK, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		leave(true)
	}
	var leaves []func(bool)
	for range 3 {
		leave, err := a.enter("STALL", ModeZK, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, leave)
	}
	_, err := a.enter("STALL", ModeZK, time.Now().Add(3*time.Second))
	busy, ok := asSKUBusy(err)
	if !ok {
		t.Fatalf("3 s without an end, budget 1 s: %v, want sku_busy", err)
	}
	if s := busy.retryAfterSeconds(); s < 1 {
		t.Errorf("Retry-After %d", s)
	}
	for _, leave := range leaves {
		leave(true)
	}
	leave, err := a.enter("STALL", ModeZK, time.Now())
	if err != nil {
		t.Fatalf("once the stalled purchases ended: %v, want admitted", err)
	}
	leave(true)
}
