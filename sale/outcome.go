package sale

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// resolveBudget bounds how long a change whose commit went unanswered spends learning what became
// of it before it answers outcome_unknown.
const resolveBudget = 5 * time.Second

var (
	// errOutcomeUnknown: the commit went unanswered and the database could not be asked in time.
	errOutcomeUnknown = errors.New("outcome unknown")
	// errNotCommitted: the commit went unanswered, and the database says it did not happen.
	errNotCommitted = errors.New("commit not applied")
)

// The resolvers run under the change's locks (settle), whether or not the client is still there.
// Each asks the database with a locking read, which waits for a transaction that still holds the
// row: found, the change stands and is answered as made; not found once the database answers,
// nothing was changed; no answer within resolveBudget, the outcome is unknown and the answer says
// so. A replay is never resolved here: it wrote nothing, so inventory answers it even when its
// commit goes unanswered, and it is not counted as a sale.

// budget is the context a resolution runs under: resolveBudget, or less when ctx's deadline comes
// first (a batch's purchases share one budget), and never cancelled with the client who left.
func budget(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(resolveBudget)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// resolveKey asks, until resolveBudget is spent, whether the key's head order exists. It ends the
// unanswered transaction first: a COMMIT stuck executing on the server (behind BACKUP STAGE
// BLOCK_COMMIT, say) would otherwise block the locking read past the budget, and apply whenever
// it is let through, however long after it was sent. It asks the store the transaction ran on
// (settledAt), and answers the store it asked for the look-ups that follow. While that store
// cannot answer, it asks the source's writer too, when that is another node (committedElsewhere):
// an order found there is committed, final; one not found there is not known to be missing.
func (e *Engine) resolveKey(ctx context.Context, key string, cause error) (context.Context, context.CancelFunc, *inventory.Store, error) {
	ctx, cancel := budget(ctx)
	at, err := e.settledAt(cause)
	if err != nil {
		return ctx, cancel, nil, err
	}
	elsewhere := func(ctx context.Context, w *inventory.Store) (bool, error) {
		_, found, err := w.OrderByRequestID(ctx, key)
		return found, err
	}
	if w, ok := e.committedElsewhere(ctx, at, elsewhere); ok {
		return ctx, cancel, w, nil
	}
	nodeCtx, nodeCancel := e.nodeContext(ctx, at)
	defer nodeCancel()
	// On failure the look-ups below still decide, once the transaction has ended.
	ended := endTransaction(nodeCtx, at, cause)
	for {
		_, found, err := at.ResolveRequest(nodeCtx, key)
		switch {
		case err == nil && !found:
			return ctx, cancel, at, fmt.Errorf("%w: %w", errNotCommitted, cause)
		case err == nil:
			return ctx, cancel, at, nil
		}
		if w, ok := e.committedElsewhere(ctx, at, elsewhere); ok {
			return ctx, cancel, w, nil
		}
		select {
		case <-nodeCtx.Done():
			return ctx, cancel, at, fmt.Errorf("%w: %w (and the look-up: %w)", errOutcomeUnknown, cause, errors.Join(ended, err))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// elsewhereTimeout bounds one look-up on the writer for committedElsewhere: a causal read there
// waits while the cluster evicts a lost node.
const elsewhereTimeout = time.Second

// nodeContext is ctx for the calls to at, the node a change went unanswered on: when the source's
// writer is another node, it ends elsewhereTimeout before ctx, so that a node that hangs (frozen,
// its link black-holed) leaves the writer time to be asked.
func (e *Engine) nodeContext(ctx context.Context, at *inventory.Store) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok || e.src.Store() == at || time.Until(d) <= 2*elsewhereTimeout {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, d.Add(-elsewhereTimeout))
}

// committedElsewhere asks the source's writer, when it is another node than at, whether a change
// unanswered at at is there (found by a plain read, causal there, within elsewhereTimeout), and
// answers the writer's Store if so. On a Galera cluster a transaction commits only once its writeset has reached every member
// (writesets are sent in safe order), and the writer's reads are causal: a change found there is
// committed, whatever became of the node it ran on. Not found there proves nothing: the COMMIT
// may still be on its way to its node, or held there, and apply later. One server is its own
// writer: false.
func (e *Engine) committedElsewhere(ctx context.Context, at *inventory.Store, found func(context.Context, *inventory.Store) (bool, error)) (*inventory.Store, bool) {
	w := e.src.Store()
	if w == at || ctx.Err() != nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, elsewhereTimeout)
	defer cancel()
	ok, err := found(ctx, w)
	return w, err == nil && ok
}

// settledAt is the store that settles the transaction whose COMMIT went unanswered in cause: the
// one it ran on (ServerConn.Addr). On a cluster that is the node, not the writer now: only that
// node can end the transaction, and only its locking reads wait for it, where another node's
// look-up could miss a COMMIT still on its way and answer it not made. When the source has that
// node no longer open, the outcome is unknown. A batch that panicked names no connection: the
// panic was recovered in the goroutine that ran its COMMIT, if it sent one, so none is on its way,
// and the writer's causal reads see whatever it committed.
func (e *Engine) settledAt(cause error) (*inventory.Store, error) {
	if errors.Is(cause, errBatchPanicked) {
		return e.src.Store(), nil
	}
	addr := inventory.UnansweredConn(cause).Addr
	at, ok := e.src.StoreAt(addr)
	if !ok {
		return nil, fmt.Errorf("%w: %w (the node it ran on, %s, is not open)", errOutcomeUnknown, cause, addr)
	}
	return at, nil
}

// endTransaction ends the transaction whose COMMIT went unanswered in cause, when cause names its
// connection, and says why it could not.
func endTransaction(ctx context.Context, store *inventory.Store, cause error) error {
	conn := inventory.UnansweredConn(cause)
	if conn.ID == 0 {
		return nil
	}
	if err := store.EndTransaction(ctx, conn); err != nil {
		return fmt.Errorf("end the transaction: %w", err)
	}
	return nil
}

// resolvePurchase learns what became of a purchase whose COMMIT went unanswered.
func (e *Engine) resolvePurchase(ctx context.Context, p inventory.Purchase, cause error, log Log) (inventory.Result, error) {
	ctx, cancel, at, err := e.resolveKey(ctx, p.RequestID, cause)
	defer cancel()
	if err != nil {
		return inventory.Result{}, err
	}
	res, found, err := at.PurchaseByKey(ctx, p)
	if err != nil || !found {
		return inventory.Result{}, fmt.Errorf("%w: %w", errOutcomeUnknown, errors.Join(cause, err))
	}
	if made, known := inventory.MadeBy(cause, res.Order.ID); known && !made {
		// Where no lock keeps a retry out, the key's order may be a retry's, made after this
		// attempt rolled back: answered as made here too, one sale would be counted twice.
		log.Info("commit unanswered and not applied: the key's order was made by a retry", "order", res.Order.ID)
		res.Replayed = true
		return res, nil
	}
	left, known := inventory.LeftBy(cause, p.SKU)
	if !known {
		// What this attempt left is not known, and the stock now is not the stock right after
		// it: answered as the look-up it is (the order, the stock now), a replay.
		log.Info("commit unanswered, but applied; the stock it left is not known", "order", res.Order.ID)
		res.Replayed = true
		return res, nil
	}
	log.Info("commit unanswered, but applied", "order", res.Order.ID)
	res.Remaining = left // the stock right after this sale: others may have sold since
	res.Replayed = false // this request made it
	return res, nil
}

// resolveCart learns what became of a cart whose COMMIT went unanswered: its key's head order
// stands for the whole cart, which is all or nothing.
func (e *Engine) resolveCart(ctx context.Context, cart inventory.Cart, cause error, log Log) (inventory.CartResult, error) {
	ctx, cancel, at, err := e.resolveKey(ctx, cart.RequestID, cause)
	defer cancel()
	if err != nil {
		return inventory.CartResult{}, err
	}
	res, found, err := at.CartByKey(ctx, cart)
	if err != nil || !found {
		return inventory.CartResult{}, fmt.Errorf("%w: %w", errOutcomeUnknown, errors.Join(cause, err))
	}
	if made, known := madeAll(cause, res.Orders); known && !made {
		log.Info("cart's commit unanswered and not applied: the key's orders were made by a retry", "orders", len(res.Orders))
		res.Replayed = true // as for a purchase (resolvePurchase)
		return res, nil
	}
	left := map[string]int64{}
	for sku := range res.Remaining {
		l, known := inventory.LeftBy(cause, sku)
		if !known {
			log.Info("cart's commit unanswered, but applied; the stock it left is not known", "orders", len(res.Orders))
			res.Replayed = true // as for a purchase (resolvePurchase)
			return res, nil
		}
		left[sku] = l
	}
	log.Info("cart's commit unanswered, but applied", "orders", len(res.Orders))
	res.Remaining = left // the stock right after this cart: others may have sold since
	res.Replayed = false // this request made it
	return res, nil
}

// madeAll says whether the unanswered attempt of cause made all of these orders; known is false
// when cause does not say which it made.
func madeAll(cause error, orders []inventory.Order) (made, known bool) {
	for _, o := range orders {
		if made, known := inventory.MadeBy(cause, o.ID); !known || !made {
			return false, known
		}
	}
	return len(orders) > 0, len(orders) > 0
}

// resolveCancel learns whether a cancellation whose COMMIT went unanswered took effect.
func (e *Engine) resolveCancel(ctx context.Context, id int64, cause error, log Log) (inventory.CancelResult, error) {
	ctx, cancel := budget(ctx)
	defer cancel()
	at, err := e.settledAt(cause)
	if err != nil {
		return inventory.CancelResult{}, err
	}
	// As resolveKey: a cancellation the writer, another node, holds is made; one it does not
	// hold, not known.
	var wo inventory.Order
	elsewhere := func(ctx context.Context, w *inventory.Store) (bool, error) {
		o, found, err := w.OrderByID(ctx, id)
		wo = o
		return found && o.CancelledAt != nil, err
	}
	nodeCtx, nodeCancel := e.nodeContext(ctx, at)
	defer nodeCancel()
	var ended error
	for first := true; ; first = false {
		var o inventory.Order
		var err error
		if w, ok := e.committedElsewhere(ctx, at, elsewhere); ok {
			at, o = w, wo
		} else {
			if first {
				ended = endTransaction(nodeCtx, at, cause) // as resolveKey
			}
			o, err = at.ResolveCancel(nodeCtx, id)
		}
		switch {
		case err == nil && o.CancelledAt == nil:
			return inventory.CancelResult{}, fmt.Errorf("%w: %w", errNotCommitted, cause)
		case err == nil:
			if left, made, _ := inventory.CancelledBy(cause, o); made {
				log.Info("cancellation's commit unanswered, but applied")
				return inventory.CancelResult{Order: o, Remaining: left}, nil // the stock right after it
			}
			// Cancelled, but not known to be by this attempt (a retry elsewhere may have done it
			// after this one rolled back): answered as the replay it may be, with the stock now,
			// or -1 when that cannot be read; the cancellation stands either way.
			log.Info("order found cancelled after an unanswered commit, not known to be by this attempt")
			remaining := int64(-1)
			if prod, err := at.Product(ctx, o.SKU); err == nil {
				remaining = prod.Stock
			}
			return inventory.CancelResult{Order: o, Remaining: remaining, Replayed: true}, nil
		}
		select {
		case <-nodeCtx.Done():
			return inventory.CancelResult{}, fmt.Errorf("%w: %w (and the look-up: %w)", errOutcomeUnknown, cause, errors.Join(ended, err))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
