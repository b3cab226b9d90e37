package order

import (
	"context"
	"fmt"
	"testing"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/inventory"
)

// An error that says the outcome is unknown is answered outcome_unknown, whatever else it wraps
// (a lost lock, a stale token, a client gone...): each of those answers says nothing was changed,
// which the unknown outcome does not know.
func TestAnUnknownOutcomeIsNeverAnsweredNotDone(t *testing.T) {
	for _, also := range []error{dlock.ErrLost, errLockLost, inventory.ErrStaleToken, errShuttingDown, errLockUnavailable,
		errUnknownMode, context.Canceled, inventory.ErrOutOfStock, &inventory.ShortError{SKU: "A"}, errNotCommitted} {
		err := fmt.Errorf("%w: %w", errOutcomeUnknown, also)
		if e := purchaseError(err); e.Code != "outcome_unknown" {
			t.Errorf("purchase: unknown and %v answered %s", also, e.Code)
		}
		if e := cancelError(err); e.Code != "outcome_unknown" {
			t.Errorf("cancellation: unknown and %v answered %s", also, e.Code)
		}
	}
}
