package inventory_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// A batch whose COMMIT goes unanswered keeps only the answers that do not hang on that commit: a
// quantity the stock did not cover before the batch sold anything. A purchase refused because the
// batch's own sales took the stock, and a repeat of a key the batch used, are unknown with the
// rest (the reviewer found them answered 409 and 422 though the batch may not have committed).
func TestBatchAnswersWhenItsCommitGoesUnanswered(t *testing.T) {
	proxy, dsn := tcpproxy.ProxiedDSN(t, testenv.MySQLDatabase(t), nil)
	ctx := context.Background()
	s := openStoreAt(t, dsn)
	mustReset(t, s, "BATCH-U", 5)
	mk := func(qty int64, key string) inventory.BatchItem {
		return inventory.BatchItem{Purchase: inventory.Purchase{SKU: "BATCH-U", Qty: qty, RequestID: key}}
	}
	items := []inventory.BatchItem{mk(5, "u-1"), mk(5, "u-2"), mk(6, "u-3"), mk(5, "u-1"), mk(4, "u-1")}
	proxy.CutAfterQuery(func(q string) bool { return strings.EqualFold(q, "COMMIT") }, false)
	err := s.DeductBatch(ctx, "BATCH-U", inventory.Fence{Token: 1}, items, nil)
	if !errors.Is(err, inventory.ErrOutcomeUnknown) {
		t.Fatalf("batch: %v, want ErrOutcomeUnknown", err)
	}
	for i, want := range []error{inventory.ErrOutcomeUnknown, inventory.ErrOutcomeUnknown, inventory.ErrOutOfStock, inventory.ErrOutcomeUnknown, inventory.ErrOutcomeUnknown} {
		if !errors.Is(items[i].Err, want) {
			t.Errorf("item %d: %v, want %v", i, items[i].Err, want)
		}
	}
	if !items[3].Repeat || !items[4].Repeat || items[0].Repeat {
		t.Errorf("repeats: %v %v %v, want false true true", items[0].Repeat, items[3].Repeat, items[4].Repeat)
	}
}

// Each purchase of a batch whose COMMIT goes unanswered keeps the stock right after it in the
// batch's order, so that a resolver that finds the batch applied answers each with its own stock,
// not the batch's last nor the stock at its look-up.
func TestBatchItemsKeepTheStockTheyLeft(t *testing.T) {
	proxy, dsn := tcpproxy.ProxiedDSN(t, testenv.MySQLDatabase(t), nil)
	s := openStoreAt(t, dsn)
	mustReset(t, s, "BATCH-L", 10)
	mk := func(qty int64, key string) inventory.BatchItem {
		return inventory.BatchItem{Purchase: inventory.Purchase{SKU: "BATCH-L", Qty: qty, RequestID: key}}
	}
	items := []inventory.BatchItem{mk(1, "l-a"), mk(2, "l-b"), mk(1, "l-a"), mk(20, "l-c")}
	proxy.CutAfterQuery(func(q string) bool { return strings.EqualFold(q, "COMMIT") }, false)
	if err := s.DeductBatch(context.Background(), "BATCH-L", inventory.Fence{Token: 1}, items, nil); !errors.Is(err, inventory.ErrOutcomeUnknown) {
		t.Fatalf("batch: %v, want ErrOutcomeUnknown", err)
	}
	for i, want := range []int64{9, 7, 7} {
		if !errors.Is(items[i].Err, inventory.ErrOutcomeUnknown) {
			t.Errorf("item %d: %v, want ErrOutcomeUnknown", i, items[i].Err)
		}
		if left, known := inventory.LeftBy(items[i].Err, "BATCH-L"); !known || left != want {
			t.Errorf("item %d left %d (known %v), want %d", i, left, known, want)
		}
	}
	if !errors.Is(items[3].Err, inventory.ErrOutOfStock) {
		t.Errorf("item 3: %v, want ErrOutOfStock (short before the batch sold anything)", items[3].Err)
	}
	a, found, err := s.OrderByRequestID(context.Background(), "l-a")
	if err != nil || !found {
		t.Fatalf("the batch's order for l-a: %v %v", found, err)
	}
	for _, i := range []int{0, 2} { // the purchase and its repeat answer with the same order
		if made, known := inventory.MadeBy(items[i].Err, a.ID); !known || !made {
			t.Errorf("item %d: made order %d %v (known %v), want made", i, a.ID, made, known)
		}
	}
}
