package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

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
// lock, by the same mode rules as a sale (fenced in the zk modes, the unsafe read-modify-write in
// none), and the order is marked cancelled. Cancelling again answers 200 with the same cancelled
// order and changes nothing. The body is empty, or {}.
func (s *Server) cancelOrder(c *gin.Context) {
	id, ok := positiveID(c.Param("id"))
	if !ok {
		abortWith(c, badRequest("the order id must be a whole number from 1 to 9223372036854775807"))
		return
	}
	if c.Request.ContentLength != 0 {
		if e := requireJSON(c); e != nil {
			abortWith(c, e)
			return
		}
		var none struct{}
		if e := decodeJSON(c, &none); e != nil {
			abortWith(c, e)
			return
		}
	}
	ctx := c.Request.Context()
	mode := s.Mode()
	log := s.log.With("order", id, "mode", mode)
	res, err := s.cancel(ctx, id, mode, log)
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
	s.metrics.stock.WithLabelValues(res.Order.SKU).Set(float64(res.Remaining))
	if !res.Replayed {
		s.feeds.notify(res.Order.SKU)
	}
	log.Info("cancellation", "result", result, "sku", res.Order.SKU, "qty", res.Order.Qty, "remaining", res.Remaining)
	c.JSON(http.StatusOK, cancelResponse{Order: res.Order, Remaining: res.Remaining, Replayed: res.Replayed, Replica: s.cfg.ReplicaID, Mode: mode})
}

func (s *Server) cancel(ctx context.Context, id int64, mode LockMode, log *slog.Logger) (inventory.CancelResult, error) {
	// Before the lock: the order's SKU names the lock, and a cancelled order needs none.
	o, found, err := s.store.OrderByID(ctx, id)
	switch {
	case err != nil:
		return inventory.CancelResult{}, err
	case !found:
		return inventory.CancelResult{}, inventory.ErrUnknownOrder
	case o.CancelledAt != nil:
		prod, err := s.store.Product(ctx, o.SKU)
		if err != nil {
			return inventory.CancelResult{}, err
		}
		return inventory.CancelResult{Order: o, Remaining: prod.Stock, Replayed: true}, nil
	}
	var res inventory.CancelResult
	err = s.underLock(ctx, o.SKU, mode, log, func(ctx context.Context, m inventory.Mode, token int64, hooks inventory.Hooks) error {
		var err error
		res, err = s.store.Cancel(ctx, inventory.Cancellation{OrderID: id, SKU: o.SKU, Token: token}, m, hooks)
		return err
	})
	if errors.Is(err, inventory.ErrOutcomeUnknown) {
		return s.resolveCancel(ctx, id, err, log)
	}
	return res, err
}

// resolveCancel learns whether a cancellation whose COMMIT went unanswered took effect, as resolve
// does for a purchase.
func (s *Server) resolveCancel(ctx context.Context, id int64, cause error, log *slog.Logger) (inventory.CancelResult, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveBudget)
	defer cancel()
	for {
		o, err := s.store.ResolveCancel(ctx, id)
		switch {
		case err == nil && o.CancelledAt == nil:
			return inventory.CancelResult{}, fmt.Errorf("%w: %w", errNotCommitted, cause)
		case err == nil:
			log.Info("cancellation's commit unanswered, but applied")
			remaining := int64(-1) // not known
			if prod, err := s.store.Product(ctx, o.SKU); err == nil {
				remaining = prod.Stock
			}
			return inventory.CancelResult{Order: o, Remaining: remaining}, nil
		}
		select {
		case <-ctx.Done():
			return inventory.CancelResult{}, fmt.Errorf("%w: %w (and the look-up: %w)", errOutcomeUnknown, cause, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// cancelError maps a failed cancellation to its HTTP answer; what it shares with a purchase (the
// lock, the fence, the database) is answered alike.
func cancelError(err error) *apiError {
	switch {
	case errors.Is(err, inventory.ErrUnknownOrder):
		return newError(http.StatusNotFound, "unknown_order", "no such order")
	case errors.Is(err, errOutcomeUnknown):
		return newError(http.StatusServiceUnavailable, "outcome_unknown", "the database did not confirm the cancellation and could not be asked in time: "+
			"it may have been made. Look the order up with GET /v1/orders/ID, or cancel again: it is never cancelled twice")
	}
	e := purchaseError(err)
	if e.Code == "storage_unavailable" {
		e.Message = "the database did not complete the cancellation; nothing was changed; retry"
	}
	return e
}
