package order

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"mime"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/sale"
)

type purchaseRequest struct {
	SKU   *string     `json:"sku"`
	Qty   *int64      `json:"qty"`
	Items *[]cartItem `json:"items"` // a cart, instead of sku and qty
}

type purchaseResponse struct {
	RequestID string          `json:"request_id"` // the Idempotency-Key: the client's, or one made for it
	Order     inventory.Order `json:"order"`
	Remaining int64           `json:"remaining"`
	Replayed  bool            `json:"replayed"`
	Replica   string          `json:"replica"`
	Mode      LockMode        `json:"mode"`
}

// purchase is POST /v1/orders. Validation comes first, before any lock is taken.
func (s *Server) purchase(c *gin.Context) {
	p, cart, apiErr := s.parsePurchase(c)
	if apiErr != nil {
		s.metrics.orders.WithLabelValues("invalid_request").Inc()
		abortWith(c, apiErr)
		return
	}
	if cart != nil {
		s.purchaseCart(c, *cart)
		return
	}
	// Every answer names the purchase's key, so that a client who gets no answer it can trust
	// (a timeout, a 503 outcome_unknown) can look the purchase up or retry it safely.
	c.Header("Idempotency-Key", p.RequestID)
	ctx, release, res, replayed, err := s.sales.HoldPurchase(c.Request.Context(), p)
	if err != nil {
		s.refusePurchase(c, saleAnswer(err, aPurchase), p.RequestID, sale.NewLog(s.log, slog.String("sku", p.SKU), slog.String("request_id", p.RequestID)), err)
		return
	}
	defer release()
	mode := LockMode(s.fleet.Mode().Name) // a replay's answer names the fleet's mode now
	log := sale.NewLog(s.log, slog.String("sku", p.SKU), slog.String("request_id", p.RequestID))
	if !replayed {
		ctx, ticket, done, err := s.sales.Admit(ctx, s.fleet)
		if err != nil {
			s.refusePurchase(c, saleAnswer(err, aPurchase), p.RequestID, log, err)
			return
		}
		defer done()
		mode = ticket.Mode()
		log = sale.NewLog(s.log, slog.String("sku", p.SKU), slog.String("mode", string(mode)), slog.String("request_id", p.RequestID))
		if e := s.vetLocks(ctx, mode, p.SKU); e != nil { // a lock path another identity made: refused, not waited on
			s.refusePurchase(c, e, p.RequestID, log, e)
			return
		}
		if res, err = s.sales.Sell(ctx, ticket, p, log); err != nil {
			s.refusePurchase(c, saleAnswer(err, aPurchase), p.RequestID, log, err)
			return
		}
	}
	status, result := s.countSale(res.Replayed)
	s.sales.StockGauge(p.SKU).Set(float64(res.Remaining))
	if !res.Replayed {
		s.feeds.sold(p.SKU)
	}
	log.InfoAttrs("purchase", slog.String("result", result), slog.Int64("order", res.Order.ID), slog.Int64("token", res.Order.FenceToken),
		slog.Int64("remaining", res.Remaining))
	c.JSON(status, purchaseResponse{RequestID: p.RequestID, Order: res.Order, Remaining: res.Remaining, Replayed: res.Replayed, Replica: s.cfg.ReplicaID, Mode: mode})
}

// refusePurchase answers a failed purchase or cart: the error with the key it ran under, counted,
// and logged when the service is at fault.
func (s *Server) refusePurchase(c *gin.Context, e *apiError, key string, log sale.Log, err error) {
	e.RequestID = key
	s.metrics.orders.WithLabelValues(e.Code).Inc()
	// Shedding load is the service working as meant, and is not logged: the metrics count it.
	if e.Status >= 500 && e.Code != "sku_busy" {
		log.Warn("purchase failed", "code", e.Code, "err", err)
	}
	abortWith(c, e)
}

// countSale counts a sale, or its replay, and says how to answer it.
func (s *Server) countSale(replayed bool) (status int, result string) {
	if replayed {
		s.metrics.replayed.Inc()
		return http.StatusOK, "replayed"
	}
	s.metrics.created.Inc()
	return http.StatusCreated, "created"
}

// parsePurchase reads a purchase of one SKU, or a cart (cart != nil).
func (s *Server) parsePurchase(c *gin.Context) (p inventory.Purchase, cart *inventory.Cart, _ *apiError) {
	if e := requireJSON(c); e != nil {
		return p, nil, e
	}
	var req purchaseRequest
	if e := decodeJSON(c, &req); e != nil {
		return p, nil, e
	}
	key := c.GetHeader("Idempotency-Key")
	if len(key) > 128 || !printableASCII(key) || inventory.CheckClientKey(key) != nil {
		return p, nil, badRequest("Idempotency-Key must be at most 128 printable ASCII characters, without '" + inventory.KeySeparator + "'")
	}
	newKey := key == ""
	if newKey {
		key = newRequestID()
	}
	if req.Items != nil {
		if req.SKU != nil || req.Qty != nil {
			return p, nil, badRequest("send either sku and qty, or items, not both")
		}
		items, e := parseCart(*req.Items)
		if e != nil {
			return p, nil, e
		}
		return p, &inventory.Cart{Items: items, RequestID: key, NewKey: newKey, Replica: s.cfg.ReplicaID}, nil
	}
	switch {
	case req.SKU == nil:
		return p, nil, badRequest("sku is required (or items, for a cart)")
	case req.Qty == nil:
		return p, nil, badRequest("qty is required")
	case *req.Qty < 1 || *req.Qty > MaxQty:
		return p, nil, badRequest(fmt.Sprintf("qty must be a whole number from 1 to %d", MaxQty))
	}
	if e := validSKU(*req.SKU); e != nil {
		return p, nil, e
	}
	return inventory.Purchase{SKU: *req.SKU, Qty: *req.Qty, RequestID: key, NewKey: newKey, Replica: s.cfg.ReplicaID}, nil, nil
}

func requireJSON(c *gin.Context) *apiError {
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || mt != "application/json" {
		return newError(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json")
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// newRequestID makes the key of a purchase that came without an Idempotency-Key.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+: it crashes the program instead)
	return "gen-" + hex.EncodeToString(b[:])
}
