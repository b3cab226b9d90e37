package order

import (
	"testing"
	"time"
)

// The live page's rates: none until the samples span minRateSpan, then per second over the last
// rateWindow only; through a reset of the product the fleet's rate goes on, not negative.
func TestRateMeterWindowAndReset(t *testing.T) {
	m := &rateMeter{}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	if r := m.next(counts{at: at(0), fleetOrders: 100, sold: 10}); r != nil {
		t.Fatalf("one sample gave rates: %+v", r)
	}
	if r := m.next(counts{at: at(400), fleetOrders: 140, sold: 20}); r != nil {
		t.Fatalf("400 ms of samples gave rates: %+v", r)
	}
	r := m.next(counts{at: at(1000), fleetOrders: 200, sold: 30})
	if r == nil || r.Window != 1 || r.FleetPurchasesPerSecond != 100 || r.PurchasesPerSecond != 20 {
		t.Fatalf("over 1 s, 100 orders and 20 sold: %+v", r)
	}
	// 3 s on: the samples older than 2 s are dropped; the base is the one at 1 s.
	r = m.next(counts{at: at(3000), fleetOrders: 300, sold: 50})
	if r == nil || r.Window != 2 || r.FleetPurchasesPerSecond != 50 || r.PurchasesPerSecond != 10 {
		t.Fatalf("over the last 2 s, 100 orders and 20 sold: %+v", r)
	}
	// The product is reset (its 300 orders deleted) and 10 are made: the base (3 s) is moved down
	// with the drop; those 10 go uncounted, nothing is negative, and the rate goes on from there.
	r = m.next(counts{at: at(3500), fleetOrders: 10, sold: 60})
	if r == nil || r.Window != 0.5 || r.FleetPurchasesPerSecond != 0 || r.PurchasesPerSecond != 20 {
		t.Fatalf("through a reset: %+v", r)
	}
	r = m.next(counts{at: at(4000), fleetOrders: 60, sold: 70})
	if r == nil || r.Window != 1 || r.FleetPurchasesPerSecond != 50 {
		t.Fatalf("after the reset, 50 orders made in the last second: %+v", r)
	}
}
