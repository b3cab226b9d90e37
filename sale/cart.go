package sale

import (
	"context"
	"errors"

	"github.com/zkstock/zkstock/inventory"
)

// SellCart sells a cart under its ticket's mode: every SKU's lock, in one canonical order, and one
// transaction that sells all the items or none. A retry of a finished cart is answered from the
// orders table. Every mode takes the SKUs' locks as its row says; zk-batch's carts do not go
// through the batchers (they sell one SKU each) but take the SKUs' locks as mode zk does. The
// error is an *Error.
func (e *Engine) SellCart(ctx context.Context, t Ticket, cart inventory.Cart, log Log) (inventory.CartResult, error) {
	res, err := e.sellCart(ctx, t, cart, log)
	return res, e.keepIfUnknown(cart.RequestID, typed(err))
}

func (e *Engine) sellCart(ctx context.Context, t Ticket, cart inventory.Cart, log Log) (inventory.CartResult, error) {
	skus := make([]string, len(cart.Items))
	for i, it := range cart.Items {
		if err := e.productExists(ctx, it.SKU); err != nil {
			return inventory.CartResult{}, err // an unknown SKU creates no lock path
		}
		skus[i] = it.SKU
	}
	if !e.noOrderUnder(cart.RequestID, cart.NewKey) {
		res, found, err := e.store().CartByKey(ctx, cart)
		switch {
		case errors.Is(err, inventory.ErrKeyReused):
			return inventory.CartResult{}, err // refused before any lock is taken
		case err != nil:
			warnKeyLookupFailed(log, err)
		case found:
			return res, nil
		}
	}
	var res inventory.CartResult
	err := e.run(ctx, t, log, change{
		skus: skus,
		apply: func(ctx context.Context, m inventory.Mode, f fencing, hooks inventory.Hooks) error {
			cart.Issuer, cart.Tokens = f.issuer, f.tokens
			var err error
			res, err = e.store().DeductCart(ctx, cart, m, hooks)
			return err
		},
		resolve: func(ctx context.Context, cause error) error {
			var err error
			res, err = e.resolveCart(ctx, cart, cause, log)
			return err
		},
	})
	return res, err
}
