package inventory_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// A cancellation whose COMMIT never reached the server (rolled back), and a retry that cancelled
// the order in the same millisecond: the first one's resolver finds the order cancelled at its
// own time to the millisecond, and must still not take the retry's cancellation for its own
// (answered so, both attempts said they cancelled, and the first with the stock its rolled-back
// writes would have left). Both stores' clocks are frozen to make the millisecond the same.
func TestUnansweredCancelTellsItsOwnMarkFromARetrys(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	proxy, proxied := tcpproxy.ProxiedDSN(t, dsn, nil)
	first, retry := openStoreAt(t, proxied), openStoreAt(t, dsn)
	at := time.Now()
	first.FreezeClockForTest(at)
	retry.FreezeClockForTest(at)
	ctx := context.Background()
	const sku = "UNANSWERED-C"
	mustReset(t, retry, sku, 10)
	bought, err := retry.Deduct(ctx, inventory.Purchase{SKU: sku, Qty: 1, RequestID: "unanswered-c"}, inventory.CAS, inventory.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	c := inventory.Cancellation{OrderID: bought.Order.ID, SKU: sku}
	fired := proxy.DropQueryAndHold(func(q string) bool { return strings.EqualFold(q, "COMMIT") })
	_, unanswered := first.Cancel(ctx, c, inventory.CAS, inventory.Hooks{})
	<-fired
	if !errors.Is(unanswered, inventory.ErrOutcomeUnknown) {
		t.Fatalf("the first cancellation: %v, want ErrOutcomeUnknown", unanswered)
	}
	if res, err := retry.Cancel(ctx, c, inventory.CAS, inventory.Hooks{}); err != nil || res.Replayed {
		t.Fatalf("the retry: %+v %v, want it to cancel", res, err)
	}
	proxy.Restore()
	o, err := retry.ResolveCancel(ctx, c.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	if o.CancelledAt == nil || !o.CancelledAt.Equal(at.UTC().Truncate(time.Millisecond)) {
		t.Fatalf("the order's cancelled_at %v, want the frozen %v: the test would prove nothing", o.CancelledAt, at)
	}
	if _, made, known := inventory.CancelledBy(unanswered, o); !known || made {
		t.Fatalf("CancelledBy = made %v (known %v), want not made: the retry cancelled the order", made, known)
	}
}
