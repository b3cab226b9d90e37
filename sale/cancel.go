package sale

import (
	"context"

	"github.com/zkstock/zkstock/inventory"
)

// Cancel cancels an order under its ticket's mode: the order's units go back to stock under the
// SKU's lock, and the order is marked cancelled. allowed says whether the caller may cancel the
// order (KindWrongKey when not). An order cancelled before is answered as a replay and changes
// nothing. A cancellation made here drops the SKU's sold-out suspicion. The error is an *Error.
func (e *Engine) Cancel(ctx context.Context, t Ticket, id int64, allowed func(inventory.Order) bool, log Log) (inventory.CancelResult, error) {
	res, err := e.cancel(ctx, t, id, allowed, log)
	if err != nil {
		return res, e.keepIfUnknown(inventory.CancelKey(id), typed(err))
	}
	if !res.Replayed {
		e.soldOut.noteRestock(res.Order.SKU, res.Remaining)
	}
	return res, nil
}

func (e *Engine) cancel(ctx context.Context, t Ticket, id int64, allowed func(inventory.Order) bool, log Log) (inventory.CancelResult, error) {
	// Before the lock: the order's SKU names the lock, its key (which never changes) says who
	// may cancel it, and a cancelled order needs no lock.
	o, found, err := e.store().OrderByID(ctx, id)
	switch {
	case err != nil:
		return inventory.CancelResult{}, err
	case !found:
		return inventory.CancelResult{}, inventory.ErrUnknownOrder
	case !allowed(o):
		return inventory.CancelResult{}, errNotYourOrder
	case o.CancelledAt != nil:
		prod, err := e.store().Product(ctx, o.SKU)
		if err != nil {
			return inventory.CancelResult{}, err
		}
		return inventory.CancelResult{Order: o, Remaining: prod.Stock, Replayed: true}, nil
	}
	var res inventory.CancelResult
	err = e.run(ctx, t, log, change{
		skus: []string{o.SKU},
		apply: func(ctx context.Context, m inventory.Mode, f fencing, hooks inventory.Hooks) error {
			var err error
			res, err = e.store().Cancel(ctx, inventory.Cancellation{OrderID: id, SKU: o.SKU, Issuer: f.issuer, Token: f.tokens[o.SKU]}, m, hooks)
			return err
		},
		resolve: func(ctx context.Context, cause error) error {
			var err error
			res, err = e.resolveCancel(ctx, id, cause, log)
			return err
		},
	})
	return res, err
}
