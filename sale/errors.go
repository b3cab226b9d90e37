package sale

import (
	"context"
	"errors"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/fleet"
	"github.com/zkstock/zkstock/inventory"
)

// Kind is what became of a change the engine did not make, as its answer must say it.
type Kind uint8

// The kinds of *Error. Each promises that this attempt changed nothing, but KindOutcomeUnknown;
// all but KindOutcomeUnknown, KindInProgress and KindKeyUnchecked also promise that no attempt
// under the change's key is in flight (holdKey held it).
const (
	// KindStorage: the database did not complete the change (the default).
	KindStorage Kind = iota
	// KindOutcomeUnknown: the COMMIT went unanswered and the database could not be asked in time;
	// the change may have been made. It wins over whatever else the error wraps.
	KindOutcomeUnknown
	KindOutOfStock      // the stock is short (Error.SKU: a cart's first short item)
	KindSKUBusy         // admission refused it: its queue is longer than the budget (Error.RetryAfter)
	KindUnknownSKU      // no such product
	KindUnknownOrder    // no such order (a cancellation)
	KindWrongKey        // the key is not the key of the purchase that made the order (a cancellation)
	KindKeyReused       // the Idempotency-Key was used for another change
	KindStaleToken      // a newer lock holder wrote the product
	KindLockLost        // the lock, or the fleet's pass, was lost before the COMMIT
	KindLockUnavailable // the locks were not taken by the lock deadline
	KindShuttingDown    // the engine is closing (a batch not begun)
	KindClientGone      // the caller's context was cancelled
	// KindInProgress: an earlier attempt under the key may still commit, and had not been
	// answered within the wait (holdKey; Error.RetryAfter); this one tried nothing.
	KindInProgress
	// KindKeyUnchecked: the key could not be held (the database): this attempt tried nothing, and
	// whether an earlier one under the key is in flight is not known.
	KindKeyUnchecked

	// The fleet did not admit the change (Admit).
	KindFleetClosed      // the replica is leaving its fleet
	KindNotMember        // the replica's place in the fleet is in doubt
	KindUnknownMode      // the fleet's mode is not one this engine knows
	KindModeUnavailable  // this replica cannot run the fleet's mode
	KindSwitching        // the fleet was switching modes past the lock deadline
	KindFleetUnavailable // the fleet's mode could not be learnt
)

// Error is every error the engine's Admit, Sell, SellCart and Cancel return.
type Error struct {
	Kind       Kind
	SKU        string        // KindOutOfStock of a cart: the first item the stock was short of
	RetryAfter time.Duration // KindSKUBusy: when the queue is foreseen back within the budget; KindInProgress: when to ask again
	Err        error         // what happened
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// OutcomeKnown says whether the change is known not to have been made by any attempt under its
// key: false for KindOutcomeUnknown, KindInProgress and KindKeyUnchecked.
func (e *Error) OutcomeKnown() bool {
	return e.Kind != KindOutcomeUnknown && e.Kind != KindInProgress && e.Kind != KindKeyUnchecked
}

// RetryAfterSeconds is RetryAfter as the Retry-After header gives it: whole seconds, at least one.
func (e *Error) RetryAfterSeconds() int { return wholeSeconds(e.RetryAfter) }

// typed turns an error of the engine into an *Error, classified once (classify); nil stays nil.
func typed(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	e = &Error{Kind: classify(err), Err: err}
	if busy, ok := asSKUBusy(err); ok {
		e.RetryAfter = busy.retryAfter
	}
	if short := (*inventory.ShortError)(nil); errors.As(err, &short) {
		e.SKU = short.SKU
	}
	return e
}

// classify is the kind of a failed change. An unknown outcome comes first, whatever else the
// error wraps (a lost lock, a stale token, a client gone): each of those says nothing was changed.
func classify(err error) Kind {
	switch {
	case errors.Is(err, errOutcomeUnknown):
		return KindOutcomeUnknown
	case errors.Is(err, inventory.ErrOutOfStock):
		return KindOutOfStock
	case isSKUBusy(err):
		return KindSKUBusy
	case errors.Is(err, inventory.ErrUnknownSKU):
		return KindUnknownSKU
	case errors.Is(err, inventory.ErrUnknownOrder):
		return KindUnknownOrder
	case errors.Is(err, errNotYourOrder):
		return KindWrongKey
	case errors.Is(err, inventory.ErrKeyReused):
		return KindKeyReused
	case errors.Is(err, inventory.ErrStaleToken):
		return KindStaleToken
	case errors.Is(err, errLockLost), errors.Is(err, dlock.ErrLost):
		return KindLockLost
	case errors.Is(err, errShuttingDown):
		return KindShuttingDown
	case errors.Is(err, errLockUnavailable):
		return KindLockUnavailable
	case errors.Is(err, errUnknownMode):
		return KindUnknownMode
	case errors.Is(err, context.Canceled):
		return KindClientGone
	}
	return KindStorage
}

// admissionKind is the kind of a change the fleet did not admit.
func admissionKind(err error) Kind {
	switch {
	case errors.Is(err, fleet.ErrClosed):
		return KindFleetClosed
	case errors.Is(err, fleet.ErrNotMember):
		return KindNotMember
	case errors.Is(err, errUnknownMode):
		return KindUnknownMode
	case errors.Is(err, fleet.ErrCannotRun):
		return KindModeUnavailable
	case errors.Is(err, fleet.ErrSwitching):
		return KindSwitching
	}
	return KindFleetUnavailable
}

// errShuttingDown: the engine is closing and opens nothing new (a batch, the herd session, the
// Redis client); nothing was sold.
var errShuttingDown = errors.New("the replica is shutting down")

// errNotYourOrder: the key sent is not the key of the purchase that made the order.
var errNotYourOrder = errors.New("the key is not this order's")
