package order

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/inventory"
)

type cancelResponse struct {
	Order     inventory.Order `json:"order"`
	Remaining int64           `json:"remaining"`
	Replayed  bool            `json:"replayed"` // cancelled before: nothing changed
	Replica   string          `json:"replica"`
	Mode      LockMode        `json:"mode"`
}

// cancelOrder is POST /v1/orders/:id/cancel: the order's units go back to stock under the SKU's
// lock, by the mode's rules, and the order is marked cancelled. The purchase's key is the
// capability to cancel it: the body must be {"request_id": "<the key>"} (a cart's key for any of
// its orders), unless the admin bearer token comes instead. Cancelling again answers 200 with the
// same cancelled order and changes nothing.
func (s *Server) cancelOrder(c *gin.Context) {
	id, ok := positiveID(c.Param("id"))
	if !ok {
		abortWith(c, badRequest("the order id must be a whole number from 1 to 9223372036854775807"))
		return
	}
	// JSON only, an empty body included: a form or a no-cors fetch from another site's page
	// cannot send it without a preflight.
	if e := requireJSON(c); e != nil {
		abortWith(c, e)
		return
	}
	var req struct {
		RequestID *string `json:"request_id"`
	}
	if c.Request.ContentLength != 0 {
		if e := decodeJSON(c, &req); e != nil {
			abortWith(c, e)
			return
		}
	}
	admin := s.isAdmin(c)
	if !admin && (req.RequestID == nil || *req.RequestID == "") {
		abortWith(c, badRequest(`send {"request_id": "<the purchase's Idempotency-Key>"}: the key is what lets you cancel the order`))
		return
	}
	ctx, mode, done, err := s.admit(c.Request.Context())
	if err != nil {
		e := fleetError(err)
		s.metrics.cancellations.WithLabelValues(e.Code).Inc()
		abortWith(c, e)
		return
	}
	defer done()
	log := newRequestLog(s.log, slog.Int64("order", id), slog.String("mode", string(mode)))
	res, err := s.cancel(ctx, id, mode, func(o inventory.Order) bool { return admin || inventory.KeyOwns(*req.RequestID, o) }, log)
	if err != nil {
		e := cancelError(err)
		s.metrics.cancellations.WithLabelValues(e.Code).Inc()
		if e.Status >= 500 {
			log.Warn("cancellation failed", "code", e.Code, "err", err)
		}
		abortWith(c, e)
		return
	}
	result := "cancelled"
	if res.Replayed {
		result = "replayed"
	}
	s.metrics.cancellations.WithLabelValues(result).Inc()
	if res.Remaining >= 0 { // -1: a replay whose stock could not be read
		s.stockGauge(res.Order.SKU).Set(float64(res.Remaining))
	}
	if !res.Replayed {
		s.soldOut.noteRestock(res.Order.SKU)
		s.feeds.notify(res.Order.SKU)
	}
	log.Info("cancellation", "result", result, "sku", res.Order.SKU, "qty", res.Order.Qty, "remaining", res.Remaining)
	c.JSON(http.StatusOK, cancelResponse{Order: res.Order, Remaining: res.Remaining, Replayed: res.Replayed, Replica: s.cfg.ReplicaID, Mode: mode})
}

// errNotYourOrder: the key sent is not the key of the purchase that made the order.
var errNotYourOrder = errors.New("the key is not this order's")

func (s *Server) cancel(ctx context.Context, id int64, mode LockMode, allowed func(inventory.Order) bool, log requestLog) (inventory.CancelResult, error) {
	if _, err := modeOf(mode); err != nil {
		return inventory.CancelResult{}, err
	}
	// Before the lock: the order's SKU names the lock, its key (which never changes) says who
	// may cancel it, and a cancelled order needs no lock.
	o, found, err := s.store.OrderByID(ctx, id)
	switch {
	case err != nil:
		return inventory.CancelResult{}, err
	case !found:
		return inventory.CancelResult{}, inventory.ErrUnknownOrder
	case !allowed(o):
		return inventory.CancelResult{}, errNotYourOrder
	case o.CancelledAt != nil:
		prod, err := s.store.Product(ctx, o.SKU)
		if err != nil {
			return inventory.CancelResult{}, err
		}
		return inventory.CancelResult{Order: o, Remaining: prod.Stock, Replayed: true}, nil
	}
	var res inventory.CancelResult
	err = s.run(ctx, log, change{
		skus: []string{o.SKU},
		apply: func(ctx context.Context, m inventory.Mode, f fencing, hooks inventory.Hooks) error {
			var err error
			res, err = s.store.Cancel(ctx, inventory.Cancellation{OrderID: id, SKU: o.SKU, Issuer: f.issuer, Token: f.tokens[o.SKU]}, m, hooks)
			return err
		},
		resolve: func(ctx context.Context, cause error) error {
			var err error
			res, err = s.resolveCancel(ctx, id, cause, log)
			return err
		},
	})
	return res, err
}

// cancelError maps a failed cancellation to its HTTP answer; what it shares with a purchase (the
// lock, the fence, the database) is answered alike.
func cancelError(err error) *apiError {
	switch {
	case errors.Is(err, errOutcomeUnknown): // first: every other answer says nothing was changed
		return newError(http.StatusServiceUnavailable, "outcome_unknown", "the database did not confirm the cancellation and could not be asked in time: "+
			"it may have been made. Look the order up with GET /v1/orders/ID, or cancel again: it is never cancelled twice")
	case errors.Is(err, inventory.ErrUnknownOrder):
		return newError(http.StatusNotFound, "unknown_order", "no such order")
	case errors.Is(err, errNotYourOrder):
		return newError(http.StatusForbidden, "wrong_key", "request_id is not the key of the purchase that made this order; nothing was changed")
	}
	e := purchaseError(err)
	e.Message = strings.ReplaceAll(e.Message, "nothing was sold", "nothing was changed")
	if e.Code == "storage_unavailable" {
		e.Message = "the database did not complete the cancellation; nothing was changed; retry"
	}
	return e
}
