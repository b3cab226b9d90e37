package order

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock/fleet"
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

// The answers to a switch that failed say what stopped it, never the error's text (ZooKeeper's
// replies, addresses, the fleet's wrapping): issue 50, finding 6. mode_unavailable, which reads
// the fleet's members, is checked against real servers (TestSwitchAndReadinessAnswersCarryNoInternals).
func TestSwitchAnswersCarryNoInternals(t *testing.T) {
	s := &Server{cfg: Config{SwitchTimeout: 7 * time.Second}}
	inner := errors.New("zk: connection closed: read tcp 127.0.0.1:40112->127.0.0.1:2181: i/o timeout")
	for _, tc := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("%w: it is 5, not 3", fleet.ErrVersionConflict), "version_conflict"},
		{fmt.Errorf("%w (waited 7s for /zkstock/fleets/f)", fleet.ErrSwitchTimeout), "switch_timeout"},
		{fmt.Errorf("%w: switch to %q: %w", fleet.ErrSwitchUnknown, "zk", inner), "switch_unknown"},
		{fmt.Errorf("fleet: switch: take the barrier: %w", inner), "switch_failed"},
		{inner, "switch_failed"},
	} {
		e := s.switchError(context.Background(), tc.err, ModeZK, 3, fleet.Mode{Name: "zk", Version: 5})
		if e.Code != tc.code {
			t.Errorf("%v: %s, want %s", tc.err, e.Code, tc.code)
		}
		if _, ok := answers.Lookup(e.Status, e.Code); !ok {
			t.Errorf("%v: %d %s is not in answers.Table", tc.err, e.Status, e.Code)
		}
		for _, internal := range []string{"zk:", "fleet:", "127.0.0.1", "read tcp", "/zkstock/"} {
			if strings.Contains(e.Message, internal) {
				t.Errorf("%v: the text %q shows %q", tc.err, e.Message, internal)
			}
		}
	}
	if e := s.switchError(context.Background(), fleet.ErrVersionConflict, ModeZK, 3, fleet.Mode{Name: "zk", Version: 5}); !strings.Contains(e.Message, "at version 5, not 3") {
		t.Errorf("version_conflict: %q, want both versions", e.Message)
	}
}
