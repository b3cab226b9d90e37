package sale

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// Sell sells one purchase under its ticket's mode, or answers it without a turn of the lock: a
// retry of a finished purchase from the orders table, a sold-out product from a read of the stock
// made after it arrived, a queue too long for the budget with KindSKUBusy. The error is an *Error.
func (e *Engine) Sell(ctx context.Context, t Ticket, p inventory.Purchase, log Log) (inventory.Result, error) {
	res, err := e.sell(ctx, t, p, log)
	return res, e.keepIfUnknown(p.RequestID, typed(err))
}

func (e *Engine) sell(ctx context.Context, t Ticket, p inventory.Purchase, log Log) (inventory.Result, error) {
	if err := e.productExists(ctx, p.SKU); err != nil {
		return inventory.Result{}, err
	}
	// A purchase of a suspected SKU reads the stock first: found short, its key is looked up
	// after the read (answerShort), which answers a retry of a finished purchase as the look-up
	// before the lock would, and a new one out_of_stock. A look-up that fails leaves the locked
	// deduction to decide.
	keyLooked := true
	if e.soldOut.shortBeforeQueue(ctx, p.SKU, p.Qty) {
		if res, decided, err := e.answerShort(ctx, p, log, e.cfg.Metrics.SoldOutBeforeQueue); decided {
			return res, err
		}
		keyLooked = false
	}
	if res, answered, err := e.replayBeforeLock(ctx, p, log); answered {
		return res, err
	}
	leave, err := e.admission.enter(p.SKU, t.mode.name, p.Qty, time.Now())
	if err != nil {
		e.refused.Add(1)
		return inventory.Result{}, err
	}
	end := turnEnd{left: -1}
	defer func() { leave(end) }()
	var res inventory.Result
	res, end, err = e.sellQueued(ctx, t, p, log, keyLooked)
	return res, err
}

// replayBeforeLock answers a retry of a finished purchase from the orders table before the lock
// (a key that made another purchase is refused). answered is false when the purchase must go on
// to its lock.
func (e *Engine) replayBeforeLock(ctx context.Context, p inventory.Purchase, log Log) (_ inventory.Result, answered bool, _ error) {
	if e.noOrderUnder(p.RequestID, p.NewKey) {
		return inventory.Result{}, false, nil
	}
	res, found, err := e.store().PurchaseByKey(ctx, p)
	switch {
	case errors.Is(err, inventory.ErrKeyReused):
		return inventory.Result{}, true, err
	case err != nil:
		warnKeyLookupFailed(log, err)
	case found:
		return res, true, nil
	}
	return inventory.Result{}, false, nil
}

// sellQueued sells a purchase admitted to its SKU's queue, and says how its turn ended. With
// sendAway, a read of the stock that shows the product sold out while it waits ends its wait: it
// is then answered out_of_stock once its key is known not to have sold (answerShort), or queues
// again, to stay, when the key cannot be looked up.
func (e *Engine) sellQueued(ctx context.Context, t Ticket, p inventory.Purchase, log Log, sendAway bool) (inventory.Result, turnEnd, error) {
	res, err := e.sellAdmitted(ctx, t, p, log, sendAway)
	sentAway := errors.Is(err, errSoldOutWhileQueued)
	if errors.Is(err, errSoldOutKeyFree) {
		// Its key was looked up after the read that sent it away, with the others sent away.
		e.cfg.Metrics.SoldOutLeftQueue.Inc()
		e.soldOutFast.Add(1)
		return res, e.turnEnded(p, res, inventory.ErrOutOfStock, true), inventory.ErrOutOfStock
	}
	if sentAway {
		answer, decided, aerr := e.answerShort(ctx, p, log, e.cfg.Metrics.SoldOutLeftQueue)
		switch {
		case !decided:
			// Whether the key sold is unknown: queue again, to stay, and let the locked
			// deduction (which looks the key up in its transaction) decide.
			res, err = e.sellAdmitted(ctx, t, p, log, false)
			sentAway = errors.Is(err, errSoldOutWhileQueued)
		case errors.Is(aerr, inventory.ErrOutOfStock):
			err = aerr
		default:
			return answer, turnEnd{left: -1}, aerr // the key's own order, or the key reused
		}
	}
	return res, e.turnEnded(p, res, err, sentAway), err
}

// turnEnded is how a purchase's turn ended, for admission, and what it showed of the stock, for
// the sold-out answer.
func (e *Engine) turnEnded(p inventory.Purchase, res inventory.Result, err error, sentAway bool) turnEnd {
	switch {
	case err == nil:
		e.soldOut.noteStock(p.SKU, res.Remaining)
		e.gate.noteStock(p.SKU, res.Remaining)
		return turnEnd{turned: true, left: res.Remaining}
	case errors.Is(err, inventory.ErrOutOfStock):
		e.soldOut.noteShort(p.SKU)
		return turnEnd{turned: !sentAway, left: p.Qty - 1}
	case errors.Is(err, errLockUnavailable):
		return turnEnd{left: -1, timedOut: true}
	}
	return turnEnd{left: -1}
}

// keyAfterShortRead looks a purchase up by its key after a read of the stock found the stock short
// of it, before the purchase took a turn of the lock. The read alone makes out_of_stock true for a
// new purchase, but not for a client's retry: an earlier attempt with the same key may have sold
// the very unit that made the stock short (its COMMIT landing after the lookup before the lock,
// or that lookup having failed), and the key's answer is then that order (a replay), as the
// locked deduction would answer it. A lookup after the read settles it: an attempt not committed
// by then can only still sell if the stock grew after the read, and the out_of_stock is true as
// of the read. found is false, with no error, for a key the service made (nobody can have used it),
// and for one this replica holds and found free (noOrderUnder).
func (e *Engine) keyAfterShortRead(ctx context.Context, p inventory.Purchase) (inventory.Result, bool, error) {
	if e.noOrderUnder(p.RequestID, p.NewKey) {
		return inventory.Result{}, false, nil
	}
	res, found, err := e.store().PurchaseByKey(ctx, p)
	if err != nil {
		return inventory.Result{}, false, fmt.Errorf("sale: look the key up after a short read: %w", err)
	}
	return res, found, nil
}

// answerShort answers a purchase that a read of the stock found short, counted in where: its
// key's order when an earlier attempt with the key sold it (or KeyReused when the key made
// another purchase), out_of_stock otherwise, true as of the read. decided is false when the key
// could not be looked up: the locked deduction must decide.
func (e *Engine) answerShort(ctx context.Context, p inventory.Purchase, log Log, where Counter) (_ inventory.Result, decided bool, _ error) {
	res, found, err := e.keyAfterShortRead(ctx, p)
	switch {
	case found || errors.Is(err, inventory.ErrKeyReused):
		return res, true, err
	case err == nil:
		where.Inc()
		e.soldOutFast.Add(1)
		return inventory.Result{}, true, inventory.ErrOutOfStock
	}
	warnKeyLookupFailed(log, err)
	return inventory.Result{}, false, nil
}

// sellAdmitted sells a purchase admitted to its SKU's queue: through the SKU's batcher when the
// mode's row batches, else as a change of its own. With sendAway, a read of the stock that shows
// the product sold out while the purchase waits for the lock ends its wait with an error wrapping
// errSoldOutWhileQueued (soldout.go); without it, it waits its turn.
func (e *Engine) sellAdmitted(ctx context.Context, t Ticket, p inventory.Purchase, log Log, sendAway bool) (inventory.Result, error) {
	if t.mode.batched {
		return e.sellBatched(ctx, t, p)
	}
	var sale *inventory.Purchase
	if sendAway {
		sale = &p
	}
	var res inventory.Result
	err := e.run(ctx, t, log, change{
		skus: []string{p.SKU},
		sale: sale,
		apply: func(ctx context.Context, m inventory.Mode, f fencing, hooks inventory.Hooks) error {
			p.Issuer, p.Token = f.issuer, f.tokens[p.SKU]
			var err error
			res, err = e.store().Deduct(ctx, p, m, hooks)
			return err
		},
		resolve: func(ctx context.Context, cause error) error {
			var err error
			res, err = e.resolvePurchase(ctx, p, cause, log)
			return err
		},
	})
	return res, err
}

// warnKeyLookupFailed notes a failed look-up of a key before the lock. That look-up only spares a
// retry the lock: the deduction looks the key up again under the lock, in its transaction, so the
// purchase goes on and is still never sold twice.
func warnKeyLookupFailed(log Log, err error) {
	log.Warn("sale: the key could not be looked up before the lock; the locked deduction checks it", "err", err)
}
