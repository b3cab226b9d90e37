package order

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/dlock/fleet"
	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/sale"
)

// apiError is every error the API answers: {"error": "human readable", "code": "machine_code"},
// and for a purchase the key it ran under, "request_id". Every status and code it is made with is
// one of internal/answers' Table, which says what the answer promises of the change (made, not
// made, not known), and by which the checker judges it.
type apiError struct {
	Status    int    `json:"-"`
	Message   string `json:"error"`
	Code      string `json:"code"`
	SKU       string `json:"sku,omitempty"` // a cart's first short item (out_of_stock)
	RequestID string `json:"request_id,omitempty"`
	// RetryAfter, in whole seconds, goes out as the Retry-After header when set (sku_busy).
	RetryAfter int `json:"-"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, msg string) *apiError {
	return &apiError{Status: status, Code: code, Message: msg}
}

func badRequest(msg string) *apiError {
	return newError(http.StatusBadRequest, "invalid_request", msg)
}

func abortWith(c *gin.Context, e *apiError) {
	if e.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	c.AbortWithStatusJSON(e.Status, e)
}

// changeKind is what a request asked the sale engine to change, as its answer names it.
type changeKind uint8

const (
	aPurchase changeKind = iota
	aCart
	aCancellation
)

// saleAnswer is the one table from the sale engine's errors (*sale.Error, for a change the fleet
// did not admit as for one the engine did not make) to the API's answers: status, code and
// message (cancelAnswer adds the two kinds only a cancellation meets). Only
// sale.KindOutcomeUnknown, KindInProgress and KindKeyUnchecked are answered with codes whose
// promise to a retry (internal/answers) is that the outcome is not known; every other answer says
// that nothing was changed. An error that is not a *sale.Error is answered as the database's
// failure.
func saleAnswer(err error, what changeKind) *apiError {
	var se *sale.Error
	if !errors.As(err, &se) {
		se = &sale.Error{Kind: sale.KindStorage, Err: err}
	}
	nothing := "nothing was sold"
	if what == aCancellation {
		nothing = "nothing was changed"
	}
	switch se.Kind {
	case sale.KindOutcomeUnknown:
		if what == aCancellation {
			return newError(http.StatusServiceUnavailable, "outcome_unknown", "the database did not confirm the cancellation and could not be asked in time: "+
				"it may have been made. Look the order up with GET /v1/orders/ID, or cancel again: it is never cancelled twice")
		}
		return newError(http.StatusServiceUnavailable, "outcome_unknown", "the database did not confirm the purchase and could not be asked in time: "+
			"it may have been sold. Look it up with GET /v1/orders?request_id=<request_id>, or retry with the same Idempotency-Key: it is never sold twice")
	case sale.KindOutOfStock:
		if what == aCart && se.SKU != "" {
			e := newError(http.StatusConflict, "out_of_stock", "not enough stock left of "+se.SKU+"; nothing was sold")
			e.SKU = se.SKU
			return e
		}
		return newError(http.StatusConflict, "out_of_stock", "not enough stock left")
	case sale.KindSKUBusy:
		e := newError(http.StatusServiceUnavailable, "sku_busy", "this product's queue is longer than a purchase may wait: "+
			"this request sold nothing and queued nothing; retry after the seconds in Retry-After, with the same Idempotency-Key: it is never sold twice")
		e.RetryAfter = se.RetryAfterSeconds()
		return e
	case sale.KindUnknownSKU:
		return newError(http.StatusNotFound, "unknown_sku", "no such product")
	case sale.KindKeyReused:
		return newError(http.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was used for a different purchase")
	case sale.KindStaleToken:
		return newError(http.StatusServiceUnavailable, "stale_token", "a newer lock holder has written this product; retry")
	case sale.KindLockLost:
		return newError(http.StatusServiceUnavailable, "lock_lost", "the lock was lost before commit; "+nothing+"; retry")
	case sale.KindShuttingDown:
		return newError(http.StatusServiceUnavailable, "shutting_down", "the replica is shutting down; "+nothing+"; retry on another")
	case sale.KindLockUnavailable:
		return newError(http.StatusServiceUnavailable, "lock_unavailable", "the product's lock could not be taken in time; retry")
	case sale.KindClientGone:
		return newError(499, "client_closed", "the client went away; "+nothing)
	case sale.KindInProgress:
		e := newError(http.StatusConflict, "request_in_progress", "an earlier attempt under this key is still being processed, and may still "+
			"succeed: nothing is known of it yet. Retry after the seconds in Retry-After with the same key, or look it up; this request tried nothing")
		e.RetryAfter = se.RetryAfterSeconds()
		return e
	case sale.KindKeyUnchecked:
		return newError(http.StatusServiceUnavailable, "key_unavailable", "the database could not record this request's key, so nothing was tried; "+
			"an earlier attempt under the same key, if one went unanswered, may still succeed: retry with the same key")
	case sale.KindFleetClosed:
		return newError(http.StatusServiceUnavailable, "shutting_down", "the replica is shutting down; nothing was changed; retry on another")
	case sale.KindNotMember:
		return newError(http.StatusServiceUnavailable, "not_a_member",
			"this replica's place in the fleet is in doubt (its ZooKeeper session): it changes nothing until it has rejoined; nothing was changed; retry on another")
	case sale.KindUnknownMode:
		return newError(http.StatusServiceUnavailable, "unknown_mode", "the fleet's lock mode is not one this replica knows; nothing was changed")
	case sale.KindModeUnavailable:
		return newError(http.StatusServiceUnavailable, "mode_unavailable", "this replica cannot run the fleet's lock mode (its /readyz says why); nothing was changed; retry on another")
	case sale.KindSwitching:
		return newError(http.StatusServiceUnavailable, "switching_mode", "the fleet was switching lock modes for longer than LOCK_TIMEOUT; nothing was changed; retry")
	case sale.KindFleetUnavailable:
		return newError(http.StatusServiceUnavailable, "fleet_unavailable", "the fleet's mode could not be learnt; nothing was changed; retry")
	}
	if what == aCancellation {
		return newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not complete the cancellation; nothing was changed; retry")
	}
	return newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not complete the purchase; nothing was sold; retry")
}

// cancelAnswer is saleAnswer for a cancellation, with the two kinds only a cancellation meets:
// the order is not there, or the key is not its purchase's.
func cancelAnswer(err error) *apiError {
	var se *sale.Error
	if errors.As(err, &se) {
		switch se.Kind {
		case sale.KindUnknownOrder:
			return newError(http.StatusNotFound, "unknown_order", "no such order")
		case sale.KindWrongKey:
			return newError(http.StatusForbidden, "wrong_key", "request_id is not the key of the purchase that made this order; nothing was changed")
		}
	}
	return saleAnswer(err, aCancellation)
}

// switchError is the answer to a switch of the fleet's mode to `to` (from version expect, or
// fleet.AnyVersion) that did not happen, or whose outcome is not known here; cur is the mode the
// switch found. Its text says what stopped the switch in the admin's words, never the error's
// (ZooKeeper's paths and replies, Go's wrapping): the caller logs err.
func (s *Server) switchError(ctx context.Context, err error, to LockMode, expect int32, cur fleet.Mode) *apiError {
	switch {
	case errors.Is(err, fleet.ErrCannotRun):
		return newError(http.StatusConflict, "mode_unavailable", s.cannotRun(ctx, to)+"; the fleet's mode is unchanged")
	case errors.Is(err, fleet.ErrVersionConflict):
		return newError(http.StatusConflict, "version_conflict", fmt.Sprintf("the fleet's mode is at version %d, not %d; read GET /admin/lock-mode and try again", cur.Version, expect))
	case errors.Is(err, fleet.ErrSwitchTimeout):
		return newError(http.StatusServiceUnavailable, "switch_timeout", fmt.Sprintf(
			"the fleet did not let go of the old mode within %v (a change still running, or a replica holding its place): the fleet's mode is unchanged", s.switchBound()))
	case errors.Is(err, fleet.ErrSwitchUnknown):
		return newError(http.StatusServiceUnavailable, "switch_unknown", "ZooKeeper did not answer the switch's write: it may or may not be in force; read GET /admin/lock-mode")
	}
	return newError(http.StatusServiceUnavailable, "switch_failed", "ZooKeeper did not answer the switch's reads, or refused its write (this replica's log says which); the fleet's mode is unchanged")
}

// cannotRun names the members that cannot run mode to and what each runs: this replica as its
// engine says, the others as their member nodes do (read again: the switch's own read is not
// kept).
func (s *Server) cannotRun(ctx context.Context, to LockMode) string {
	var who []string
	if s.sales.CanRun(to) != nil {
		who = append(who, fmt.Sprintf("member %s cannot run %q (it runs %s)", s.cfg.ReplicaID, to, strings.Join(s.sales.Runnable(), ", ")))
	}
	members, err := s.fleet.Members(ctx)
	if err != nil {
		s.log.Warn("read the fleet's members", "err", err)
	}
	for _, mi := range members {
		if mi.ID != s.cfg.ReplicaID && !slices.Contains(mi.Modes, string(to)) {
			who = append(who, fmt.Sprintf("member %s cannot run %q (it runs %s)", mi.ID, to, strings.Join(mi.Modes, ", ")))
		}
	}
	if len(who) == 0 { // the member that could not has left since
		return fmt.Sprintf("a member of the fleet cannot run %q (this replica's log names it)", to)
	}
	return strings.Join(who, "; ")
}

// readError is the answer to a read of a product the database did not give.
func readError(err error) *apiError {
	if errors.Is(err, inventory.ErrUnknownSKU) {
		return newError(http.StatusNotFound, "unknown_sku", "no such product")
	}
	return newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not answer")
}
