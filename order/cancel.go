package order

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/sale"
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
	allowed := func(o inventory.Order) bool { return admin || inventory.KeyOwns(*req.RequestID, o) }
	log := sale.NewLog(s.log, slog.Int64("order", id))
	refuse := func(err error, logged bool) {
		e := cancelAnswer(err)
		s.metrics.cancellations.WithLabelValues(e.Code).Inc()
		if e.Status >= 500 && logged {
			log.Warn("cancellation failed", "code", e.Code, "err", err)
		}
		abortWith(c, e)
	}
	ctx, release, res, replayed, err := s.sales.HoldCancel(c.Request.Context(), id, allowed)
	if err != nil {
		refuse(err, false)
		return
	}
	defer release()
	mode := LockMode(s.fleet.Mode().Name) // a replay's answer names the fleet's mode now
	if !replayed {
		ctx, ticket, done, err := s.sales.Admit(ctx, s.fleet)
		if err != nil {
			refuse(err, false)
			return
		}
		defer done()
		mode = ticket.Mode()
		log = sale.NewLog(s.log, slog.Int64("order", id), slog.String("mode", string(mode)))
		if e := s.vetOrderLock(ctx, mode, id, allowed); e != nil { // a lock path another identity made: refused, not waited on
			s.metrics.cancellations.WithLabelValues(e.Code).Inc()
			abortWith(c, e)
			return
		}
		if res, err = s.sales.Cancel(ctx, ticket, id, allowed, log); err != nil {
			refuse(err, true)
			return
		}
	}
	result := "cancelled"
	if res.Replayed {
		result = "replayed"
	}
	s.metrics.cancellations.WithLabelValues(result).Inc()
	if res.Remaining >= 0 { // -1: a replay whose stock could not be read
		s.sales.StockGauge(res.Order.SKU).Set(float64(res.Remaining))
	}
	if !res.Replayed {
		s.feeds.notify(res.Order.SKU)
	}
	log.Info("cancellation", "result", result, "sku", res.Order.SKU, "qty", res.Order.Qty, "remaining", res.Remaining)
	c.JSON(http.StatusOK, cancelResponse{Order: res.Order, Remaining: res.Remaining, Replayed: res.Replayed, Replica: s.cfg.ReplicaID, Mode: mode})
}
