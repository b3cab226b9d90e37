package order_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/order"
)

// cancelOrder cancels the order a purchase made, with the purchase's key as the capability.
func cancelOrder(t testing.TB, r *replica, bought reply) reply {
	key, _ := bought.body["request_id"].(string)
	return call(t, "POST", fmt.Sprintf("%s/v1/orders/%d/cancel", r.URL, bought.orderID()), fmt.Sprintf(`{"request_id":%q}`, key))
}

// A cancellation returns the units and marks the order; a second one changes nothing.
func TestCancel(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{})[0]
	resetStock(t, r, "CAN-1", 10)
	bought := buy(t, r, "CAN-1", 3, "")
	if bought.status != 201 {
		t.Fatalf("buy: %d %s", bought.status, bought.raw)
	}
	first := cancelOrder(t, r, bought)
	o, _ := first.body["order"].(map[string]any)
	if first.status != 200 || first.body["remaining"] != float64(10) || first.body["replayed"] != false || o["cancelled_at"] == nil {
		t.Fatalf("cancel: %d %s", first.status, first.raw)
	}
	again := cancelOrder(t, r, bought)
	o2, _ := again.body["order"].(map[string]any)
	if again.status != 200 || again.body["replayed"] != true || o2["cancelled_at"] != o["cancelled_at"] || again.body["remaining"] != float64(10) {
		t.Fatalf("cancel again: %d %s", again.status, again.raw)
	}
	a := auditOf(t, r, "CAN-1")
	if a.Stock != 10 || a.Orders != 0 || a.UnitsSold != 0 || a.Cancelled != 1 || a.UnitsRestocked != 3 || a.LostUpdates != 0 || a.Oversold != 0 {
		t.Fatalf("audit %+v", a)
	}
	if got := call(t, "GET", fmt.Sprintf("%s/v1/orders/%d", r.URL, bought.orderID()), ""); got.status != 200 {
		t.Fatalf("the cancelled order is still there to look up: %d %s", got.status, got.raw)
	}
}

// Many cancellations of one order at once, on three replicas: one returns the units, every other
// one is a replay, in every mode, the unsafe one included (the mark is a conditional write).
func TestConcurrentCancelsOfOneOrder(t *testing.T) {
	for _, mode := range []order.LockMode{order.ModeZK, order.ModeNone} {
		t.Run(string(mode), func(t *testing.T) {
			rs := ordertest.Start(t, 3, ordertest.Options{Mode: mode, WorkDelay: 2 * time.Millisecond})
			resetStock(t, rs[0], "CAN-2", 10)
			bought := buy(t, rs[0], "CAN-2", 4, "")
			var cancelled, replayed atomic.Int32
			var wg sync.WaitGroup
			for i := 0; i < 12; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					rep := cancelOrder(t, rs[i%3], bought)
					switch {
					case rep.status == 200 && rep.body["replayed"] == false:
						cancelled.Add(1)
					case rep.status == 200:
						replayed.Add(1)
					default:
						t.Errorf("cancel: %d %s", rep.status, rep.raw)
					}
				}(i)
			}
			wg.Wait()
			if cancelled.Load() != 1 || replayed.Load() != 11 {
				t.Fatalf("%d cancelled, %d replayed; want 1 and 11", cancelled.Load(), replayed.Load())
			}
			if a := auditOf(t, rs[0], "CAN-2"); a.Stock != 10 || a.UnitsRestocked != 4 || a.LostUpdates != 0 {
				t.Fatalf("audit %+v", a)
			}
		})
	}
}

// Purchases and cancellations of one SKU at once, on three replicas: in every locked mode the
// audit is exact with the restocks in the mix.
func TestPurchasesAndCancellationsStayExact(t *testing.T) {
	for _, mode := range []order.LockMode{order.ModeZK, order.ModeZKBatch, order.ModeDBForUpdate, order.ModeDBCAS, order.ModeRedisFenced} {
		t.Run(string(mode), func(t *testing.T) {
			rs := ordertest.Start(t, 3, ordertest.Options{Mode: mode, WorkDelay: time.Millisecond})
			const sku = "CAN-3"
			resetStock(t, rs[0], sku, 40)
			var wg sync.WaitGroup
			var sold, cancels atomic.Int32
			for i := 0; i < 60; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					rep := buy(t, rs[i%3], sku, 1, "")
					if rep.status != 201 {
						return
					}
					// Every third sale is cancelled, counted by sale rather than by request: in
					// zk-batch two replicas' batches can sell the whole stock before the third
					// replica's batch takes the lock, so every request sent to one replica may fail.
					if sold.Add(1)%3 == 0 {
						if c := cancelOrder(t, rs[(i+1)%3], rep); c.status != 200 {
							t.Errorf("cancel: %d %s", c.status, c.raw)
							return
						}
						cancels.Add(1)
					}
				}(i)
			}
			wg.Wait()
			a := auditOf(t, rs[0], sku)
			t.Logf("%s: %d sold, %d cancelled; audit %+v", mode, sold.Load(), cancels.Load(), a)
			if a.LostUpdates != 0 || a.Oversold != 0 || a.Cancelled != int64(cancels.Load()) || a.Orders+a.Cancelled != int64(sold.Load()) ||
				a.Stock != 40-a.UnitsSold || cancels.Load() == 0 {
				t.Fatalf("not exact: %+v", a)
			}
		})
	}
}
