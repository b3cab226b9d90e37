package inventory_test

import (
	"context"
	"testing"

	"github.com/zkstock/zkstock/inventory"
)

// A deduction and a restock lost to concurrent read-modify-writes (mode Unsafe, no lock) are
// each counted, in its own direction: the stock ends where the orders say it must, yet the audit
// says two units were lost, one each way. Counted as how far the stock is off, they cancelled out.
func TestALostDeductionAndALostRestockDoNotCancelOut(t *testing.T) {
	s := openStore(t)
	const sku = "SKU-LOST"
	mustReset(t, s, sku, 10)
	ctx := context.Background()
	buy := func(hooks inventory.Hooks) (inventory.Result, error) {
		return s.Deduct(ctx, inventory.Purchase{SKU: sku, Qty: 1, Replica: "t"}, inventory.Unsafe, hooks)
	}
	first, err := buy(inventory.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	// race runs a cancellation of order and a purchase, both reading the stock before either
	// writes; the one named first writes first, the other then writes what it computed from its
	// read, overwriting it.
	race := func(order int64, cancelFirst bool) (bought inventory.Result) {
		t.Helper()
		entered, release := make(chan struct{}, 2), [2]chan struct{}{make(chan struct{}), make(chan struct{})}
		gate := func(i int) inventory.Hooks {
			return inventory.Hooks{Work: func(context.Context) error { entered <- struct{}{}; <-release[i]; return nil }}
		}
		done := [2]chan error{make(chan error, 1), make(chan error, 1)}
		go func() {
			_, err := s.Cancel(ctx, inventory.Cancellation{OrderID: order, SKU: sku}, inventory.Unsafe, gate(0))
			done[0] <- err
		}()
		go func() {
			var err error
			bought, err = buy(gate(1))
			done[1] <- err
		}()
		<-entered
		<-entered
		firstI := 1
		if cancelFirst {
			firstI = 0
		}
		for _, i := range []int{firstI, 1 - firstI} {
			close(release[i])
			if err := <-done[i]; err != nil {
				t.Fatal(err)
			}
		}
		return bought
	}
	second := race(first.Order.ID, false) // the purchase writes first: the restock overwrites it
	race(second.Order.ID, true)           // the cancellation writes first: the purchase overwrites it
	a := audit(t, s, sku)
	if a.Stock != a.InitialStock-a.UnitsSold {
		t.Fatalf("the stock is off: %+v", a)
	}
	if a.LostDeductions != 1 || a.LostRestocks != 1 || a.LostUpdates != 2 {
		t.Errorf("a lost deduction and a lost restock: %+v", a)
	}
}
