package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/inventory"
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
// transaction that sells all the items or none.
func (s *Server) purchaseCart(c *gin.Context, cart inventory.Cart) {
	c.Header("Idempotency-Key", cart.RequestID)
	ctx, mode, done, err := s.admit(c.Request.Context())
	if err != nil {
		s.refusePurchase(c, fleetError(err), cart.RequestID, newRequestLog(s.log, slog.Int("cart", len(cart.Items)), slog.String("request_id", cart.RequestID)), err)
		return
	}
	defer done()
	log := newRequestLog(s.log, slog.Int("cart", len(cart.Items)), slog.String("mode", string(mode)), slog.String("request_id", cart.RequestID))
	res, err := s.sellCart(ctx, cart, mode, log)
	if err != nil {
		e := purchaseError(err)
		var short *inventory.ShortError
		if errors.As(err, &short) && e.Code == "out_of_stock" {
			e.Message = "not enough stock left of " + short.SKU + "; nothing was sold"
			e.SKU = short.SKU
		}
		s.refusePurchase(c, e, cart.RequestID, log, err)
		return
	}
	status, result := s.countSale(res.Replayed)
	for sku, left := range res.Remaining {
		s.stockGauge(sku).Set(float64(left))
		if !res.Replayed {
			s.feeds.notify(sku)
		}
	}
	log.Info("cart", "result", result, "items", len(res.Orders))
	c.JSON(status, cartResponse{RequestID: cart.RequestID, Orders: res.Orders, Remaining: res.Remaining, Replayed: res.Replayed, Replica: s.cfg.ReplicaID, Mode: mode})
}

func (s *Server) sellCart(ctx context.Context, cart inventory.Cart, mode LockMode, log requestLog) (inventory.CartResult, error) {
	if _, err := modeOf(mode); err != nil {
		return inventory.CartResult{}, err
	}
	skus := make([]string, len(cart.Items))
	for i, it := range cart.Items {
		if err := s.productExists(ctx, it.SKU); err != nil {
			return inventory.CartResult{}, err // an unknown SKU creates no lock path
		}
		skus[i] = it.SKU
	}
	if !cart.NewKey {
		res, found, err := s.store.CartByKey(ctx, cart)
		switch {
		case errors.Is(err, inventory.ErrKeyReused):
			return inventory.CartResult{}, err // refused before any lock is taken
		case err != nil:
			warnKeyLookupFailed(log, err)
		case found:
			return res, nil
		}
	}
	// Every mode takes the SKUs' locks as its table row says; zk-batch's carts do not go through
	// the batchers (they sell one SKU each) but take the SKUs' locks as mode zk does.
	var res inventory.CartResult
	err := s.run(ctx, log, change{
		skus: skus,
		apply: func(ctx context.Context, m inventory.Mode, f fencing, hooks inventory.Hooks) error {
			cart.Issuer, cart.Tokens = f.issuer, f.tokens
			var err error
			res, err = s.store.DeductCart(ctx, cart, m, hooks)
			return err
		},
		resolve: func(ctx context.Context, cause error) error {
			var err error
			res, err = s.resolveCart(ctx, cart, cause, log)
			return err
		},
	})
	return res, err
}
