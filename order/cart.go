package order

import (
	"fmt"
	"log/slog"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/sale"
)

type cartItem struct {
	SKU *string `json:"sku"`
	Qty *int64  `json:"qty"`
}

type cartResponse struct {
	RequestID string            `json:"request_id"`
	Orders    []inventory.Order `json:"orders"`    // one per item, in the cart's order
	Remaining map[string]int64  `json:"remaining"` // stock per SKU after the sale
	Replayed  bool              `json:"replayed"`
	Replica   string            `json:"replica"`
	Mode      LockMode          `json:"mode"`
}

// parseCart checks a cart's items: 1 to inventory.MaxCartItems distinct SKUs, each with a qty.
func parseCart(items []cartItem) ([]inventory.CartItem, *apiError) {
	if len(items) == 0 || len(items) > inventory.MaxCartItems {
		return nil, badRequest(fmt.Sprintf("items must hold 1 to %d products", inventory.MaxCartItems))
	}
	out := make([]inventory.CartItem, len(items))
	seen := map[string]bool{}
	for i, it := range items {
		switch {
		case it.SKU == nil:
			return nil, badRequest(fmt.Sprintf("items[%d].sku is required", i))
		case it.Qty == nil:
			return nil, badRequest(fmt.Sprintf("items[%d].qty is required", i))
		case *it.Qty < 1 || *it.Qty > MaxQty:
			return nil, badRequest(fmt.Sprintf("items[%d].qty must be a whole number from 1 to %d", i, MaxQty))
		}
		if e := validSKU(*it.SKU); e != nil {
			return nil, badRequest(fmt.Sprintf("items[%d]: %s", i, e.Message))
		}
		if seen[*it.SKU] {
			return nil, badRequest(fmt.Sprintf("items[%d]: %s is in the cart twice; put the quantities together", i, *it.SKU))
		}
		seen[*it.SKU] = true
		out[i] = inventory.CartItem{SKU: *it.SKU, Qty: *it.Qty}
	}
	return out, nil
}

// purchaseCart is POST /v1/orders with "items": every SKU's lock, in one canonical order, and one
// transaction that sells all the items or none (sale.Engine.SellCart).
func (s *Server) purchaseCart(c *gin.Context, cart inventory.Cart) {
	c.Header("Idempotency-Key", cart.RequestID)
	ctx, release, res, replayed, err := s.sales.HoldCart(c.Request.Context(), cart)
	if err != nil {
		s.refusePurchase(c, saleAnswer(err, aCart), cart.RequestID, sale.NewLog(s.log, slog.Int("cart", len(cart.Items)), slog.String("request_id", cart.RequestID)), err)
		return
	}
	defer release()
	mode := LockMode(s.fleet.Mode().Name) // a replay's answer names the fleet's mode now
	log := sale.NewLog(s.log, slog.Int("cart", len(cart.Items)), slog.String("request_id", cart.RequestID))
	if !replayed {
		ctx, ticket, done, err := s.sales.Admit(ctx, s.fleet)
		if err != nil {
			s.refusePurchase(c, saleAnswer(err, aCart), cart.RequestID, log, err)
			return
		}
		defer done()
		mode = ticket.Mode()
		log = sale.NewLog(s.log, slog.Int("cart", len(cart.Items)), slog.String("mode", string(mode)), slog.String("request_id", cart.RequestID))
		if e := s.vetLocks(ctx, mode, cartSKUs(cart)...); e != nil {
			s.refusePurchase(c, e, cart.RequestID, log, e)
			return
		}
		if res, err = s.sales.SellCart(ctx, ticket, cart, log); err != nil {
			s.refusePurchase(c, saleAnswer(err, aCart), cart.RequestID, log, err)
			return
		}
	}
	status, result := s.countSale(res.Replayed)
	for sku, left := range res.Remaining {
		s.sales.StockGauge(sku).Set(float64(left))
		if !res.Replayed {
			s.feeds.sold(sku)
		}
	}
	log.Info("cart", "result", result, "items", len(res.Orders))
	c.JSON(status, cartResponse{RequestID: cart.RequestID, Orders: res.Orders, Remaining: res.Remaining, Replayed: res.Replayed, Replica: s.cfg.ReplicaID, Mode: mode})
}
