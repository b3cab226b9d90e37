package sale

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/fleet"
	"github.com/zkstock/zkstock/inventory"
)

// An error that says the outcome is unknown is of KindOutcomeUnknown, whatever else it wraps (a
// lost lock, a stale token, a client gone...): each of those kinds says nothing was changed,
// which the unknown outcome does not know.
func TestAnUnknownOutcomeIsNeverNotDone(t *testing.T) {
	for _, also := range []error{dlock.ErrLost, errLockLost, inventory.ErrStaleToken, errShuttingDown, errLockUnavailable,
		errUnknownMode, context.Canceled, inventory.ErrOutOfStock, &inventory.ShortError{SKU: "A"}, errNotCommitted,
		inventory.ErrUnknownOrder, errNotYourOrder, &errSKUBusy{}} {
		err := typed(fmt.Errorf("%w: %w", errOutcomeUnknown, also))
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindOutcomeUnknown || e.OutcomeKnown() {
			t.Errorf("unknown and %v: %#v", also, err)
		}
	}
}

// Every error the engine returns is an *Error of one kind, and keeps what it wraps.
func TestTypedErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		kind Kind
	}{
		{inventory.ErrOutOfStock, KindOutOfStock},
		{&inventory.ShortError{SKU: "A"}, KindOutOfStock},
		{&errSKUBusy{retryAfter: 1500 * time.Millisecond}, KindSKUBusy},
		{inventory.ErrUnknownSKU, KindUnknownSKU},
		{inventory.ErrUnknownOrder, KindUnknownOrder},
		{errNotYourOrder, KindWrongKey},
		{inventory.ErrKeyReused, KindKeyReused},
		{inventory.ErrStaleToken, KindStaleToken},
		{dlock.ErrLost, KindLockLost},
		{fmt.Errorf("%w: %w", errLockLost, fleet.ErrNotMember), KindLockLost},
		{errShuttingDown, KindShuttingDown},
		{fmt.Errorf("%w: %w", errLockUnavailable, context.DeadlineExceeded), KindLockUnavailable},
		{context.Canceled, KindClientGone},
		{errPlantedNotSold, KindStorage},
		{errors.New("connection refused"), KindStorage},
	} {
		err := typed(fmt.Errorf("wrapped: %w", c.err))
		var e *Error
		if !errors.As(err, &e) || e.Kind != c.kind || !e.OutcomeKnown() || !errors.Is(err, c.err) {
			t.Errorf("%v: %#v, want kind %d", c.err, err, c.kind)
		}
	}
	var e *Error
	if err := typed(&inventory.ShortError{SKU: "A"}); !errors.As(err, &e) || e.SKU != "A" {
		t.Errorf("a cart's short item is not named: %#v", err)
	}
	if err := typed(&errSKUBusy{retryAfter: 1500 * time.Millisecond}); !errors.As(err, &e) || e.RetryAfter != 1500*time.Millisecond {
		t.Errorf("sku_busy without its Retry-After: %#v", err)
	}
	if typed(nil) != nil {
		t.Error("typed(nil) is not nil")
	}
}

// A change the fleet did not admit is of a kind that says so.
func TestAdmissionKinds(t *testing.T) {
	for err, kind := range map[error]Kind{
		fleet.ErrClosed: KindFleetClosed, fleet.ErrNotMember: KindNotMember, errUnknownMode: KindUnknownMode,
		fleet.ErrCannotRun: KindModeUnavailable, fleet.ErrSwitching: KindSwitching, context.DeadlineExceeded: KindFleetUnavailable,
	} {
		if got := admissionKind(fmt.Errorf("enter: %w", err)); got != kind {
			t.Errorf("%v: kind %d, want %d", err, got, kind)
		}
	}
}
