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
