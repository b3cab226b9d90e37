package order

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/zkstock/zkstock/internal/answers"
	"github.com/zkstock/zkstock/sale"
)

// Every kind of the sale engine's errors is answered, for a purchase, a cart and a cancellation,
// with an answer of internal/answers' Table whose promise is the error's: to a retry, only an
// outcome not known (the change's, or an earlier attempt's) is answered as not known; to a first
// attempt, only the change's own outcome not known and an earlier attempt in flight (under a key
// someone else sent first). Every other answer promises that nothing was changed.
func TestEveryKindIsAnsweredAsItsPromise(t *testing.T) {
	for k := sale.Kind(0); k <= sale.KindFleetUnavailable; k++ {
		for _, what := range []changeKind{aPurchase, aCart, aCancellation} {
			se := &sale.Error{Kind: k, Err: errors.New("test")}
			e := saleAnswer(fmt.Errorf("wrapped: %w", se), what)
			if what == aCancellation {
				e = cancelAnswer(fmt.Errorf("wrapped: %w", se))
			}
			a, ok := answers.Lookup(e.Status, e.Code)
			switch {
			case !ok:
				t.Errorf("kind %d (%d): %d %s is not in answers.Table", k, what, e.Status, e.Code)
			case se.OutcomeKnown() && a.For(true) != answers.NotDone:
				t.Errorf("kind %d (%d): %d %s promises a retry %v, want not done", k, what, e.Status, e.Code, a.For(true))
			case !se.OutcomeKnown() && a.For(true) != answers.Unknown:
				t.Errorf("kind %d (%d): %d %s promises a retry %v, want unknown", k, what, e.Status, e.Code, a.For(true))
			case (k == sale.KindOutcomeUnknown || k == sale.KindInProgress) != (a.For(false) == answers.Unknown):
				t.Errorf("kind %d (%d): %d %s promises a first attempt %v", k, what, e.Status, e.Code, a.For(false))
			}
		}
	}
	if e := saleAnswer(context.Canceled, aPurchase); e.Code != "storage_unavailable" || e.Status != http.StatusServiceUnavailable {
		t.Errorf("an error that is not the engine's: %d %s, want 503 storage_unavailable", e.Status, e.Code)
	}
	busy := saleAnswer(&sale.Error{Kind: sale.KindSKUBusy, Err: errors.New("busy"), RetryAfter: 1}, aPurchase)
	if busy.RetryAfter != 1 {
		t.Errorf("sku_busy's Retry-After: %d, want at least one second", busy.RetryAfter)
	}
	short := saleAnswer(&sale.Error{Kind: sale.KindOutOfStock, Err: errors.New("short"), SKU: "A"}, aCart)
	if short.SKU != "A" {
		t.Errorf("a cart's short item is not named: %+v", short)
	}
}
