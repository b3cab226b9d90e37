package sale

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/inventory"
)

// change is one change of stock (a sale, a cart, a cancellation, a batch of sales) as every lock
// mode runs it.
type change struct {
	skus []string // the SKUs it changes, distinct
	// apply runs the change in one transaction, protected as m says, with fences from the
	// mode's locks (Fenced) and hooks that run the critical section's work and check the locks
	// and the fleet's passes before the COMMIT.
	apply func(ctx context.Context, m inventory.Mode, fences fencing, hooks inventory.Hooks) error
	// resolve learns what became of a change whose COMMIT went unanswered, by its key: nil when
	// it applied (it also records the result), errNotCommitted when it did not, errOutcomeUnknown
	// when the database could not be asked within resolveBudget. settle may call it again after
	// a first errOutcomeUnknown.
	resolve func(ctx context.Context, cause error) error
	// sale, when the change is one purchase, lets it leave the lock's queue with out_of_stock
	// when a read of the stock shows the product sold out while it waits (soldout.go).
	sale *inventory.Purchase
	// admitted, when set, is the check of the fleet's passes before the COMMIT instead of the
	// ticket's own pass (a batch holds one pass per purchase).
	admitted func() error
}

// fencing is the holding's tokens and who issued them.
type fencing struct {
	issuer inventory.Issuer
	tokens map[string]int64 // per SKU; nil in the modes without tokens
}

// run runs a change under its ticket's row of the mode table: the one dispatch of lock modes, for
// a purchase, a cart, a cancellation and a batch alike. The locks are taken in sorted order, so
// that two changes that share SKUs cannot each hold what the other waits for; they span the whole
// transaction, and an unanswered COMMIT is settled (settle) before they are released.
func (e *Engine) run(ctx context.Context, t Ticket, log Log, ch change) error {
	if t.mode.name == "" {
		return errNotAdmitted
	}
	sorted := slices.Sorted(slices.Values(ch.skus))
	err := e.runOnce(ctx, t, sorted, log, ch)
	// A second attempt only before the change's deadline: none runs past it (LongestChange).
	lm := t.mode
	if lm.repairStale != nil && errors.Is(err, inventory.ErrStaleToken) && ctx.Err() == nil && lm.repairStale(e, ctx, sorted, log) && ctx.Err() == nil {
		err = e.runOnce(ctx, t, sorted, log, ch) // the refusal wrote nothing
	}
	return err
}

func (e *Engine) runOnce(ctx context.Context, t Ticket, sorted []string, log Log, ch change) error {
	admitted := ch.admitted
	if admitted == nil {
		admitted = stillAdmitted(t.pass)
	}
	lm := t.mode
	if lm.lock == nil {
		tctx, deadline, end := txContext(ctx)
		defer end()
		err := ch.apply(tctx, lm.protect, fencing{}, inventory.Hooks{Work: e.work(t.pass), BeforeCommit: admitted, Deadline: deadline})
		return e.settle(tctx, ch, err, log)
	}
	var held holding
	turnOver := func(error) {} // a sale's turn tells its SKU's gate how it ended
	return e.withLock(ctx, t.lockDeadline, log, func(lockCtx context.Context) (release, error) {
		waitCtx, queued := lockCtx, func() {}
		if ch.sale != nil {
			key := ch.sale.RequestID
			if e.noOrderUnder(key, ch.sale.NewKey) {
				key = "" // nothing for the sold-out poller to look up
			}
			waitCtx, queued = e.soldOut.queue(lockCtx, ch.sale.SKU, ch.sale.Qty, key)
		}
		h, over, err := e.lockBehindGate(waitCtx, lm, sorted, ch.sale)
		queued()
		if err != nil {
			return nil, leftQueue(waitCtx, err)
		}
		held, turnOver = h, over
		return h.Unlock, nil
	}, func() (err error) {
		defer func() { turnOver(err) }() // on every path, a panic's too: the gate's place is given back
		tctx, deadline, end := txContext(ctx)
		defer end()
		err = ch.apply(tctx, lm.protect, fencing{issuer: lm.issuer, tokens: held.Tokens()},
			inventory.Hooks{Work: e.work(held), BeforeCommit: func() error { return errors.Join(stillHeld(held)(), admitted()) }, Deadline: deadline})
		return e.settle(tctx, ch, err, log)
	})
}

// lockBehindGate takes the mode's locks; a sale first passes its SKU's gate (lockgate.go), which
// keeps the lock queue here no longer than the stock. turnOver, called with the change's error
// once its turn is over, tells the gate how it ended.
func (e *Engine) lockBehindGate(ctx context.Context, lm lockMode, sorted []string, sale *inventory.Purchase) (_ holding, turnOver func(error), _ error) {
	if sale == nil {
		h, err := lm.lock(e, ctx, sorted)
		return h, func(error) {}, err
	}
	passed, err := e.gate.enter(ctx, sale.SKU, sale.Qty)
	if err != nil {
		return nil, nil, err
	}
	h, err := lm.lock(e, ctx, sorted)
	if err != nil {
		passed(err)
		return nil, nil, err
	}
	return h, passed, nil
}

// release gives a lock back.
type release func(context.Context) error

// withLock is the frame of every locked change: acquire by the change's lock deadline, run
// critical, then release on every path (an early return, an error, a panic) with a context the
// caller cannot cancel, so that a client who hangs up does not leave the lock held. The wait and
// the hold are timed for the metrics. A failure to acquire wraps errLockUnavailable.
func (e *Engine) withLock(ctx context.Context, lockDeadline time.Time, log Log, acquire func(context.Context) (release, error), critical func() error) error {
	waitStart := time.Now()
	lockCtx, cancel := context.WithDeadline(ctx, lockDeadline)
	var rel release
	err := lockCtx.Err() // a lock deadline passed already: no wait begins
	if err == nil {
		rel, err = acquire(lockCtx)
	}
	cancel()
	e.cfg.Metrics.LockWait.Observe(time.Since(waitStart).Seconds())
	if err != nil {
		return fmt.Errorf("%w: %w", errLockUnavailable, err)
	}
	heldSince := time.Now()
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		switch err := rel(rctx); {
		case errors.Is(err, dlock.ErrReleasePending):
			// ZooKeeper is unreachable for now: the delete goes on in the background, and the
			// node goes with the session at the latest. Nothing for anyone to act on.
			log.Debug("lock release pending", "err", err)
		case err != nil:
			log.Warn("lock release", "err", err)
		}
		e.cfg.Metrics.LockHold.Observe(time.Since(heldSince).Seconds())
	}()
	return critical()
}

// stillHeld is the last check before commit: a lease lost by then rolls the transaction back.
func stillHeld(lease leaseState) func() error {
	return func() error {
		select {
		case <-lease.Lost():
			return errLockLost
		default:
			return nil
		}
	}
}

// work is the simulated work inside the critical section (WORK_DELAY, a payment call, say). It
// runs under the lease's context as well as the request's, as a real critical section passes the
// lease's context down to its calls, so that it stops as soon as the lease is lost.
func (e *Engine) work(lease leaseState) func(context.Context) error {
	return func(ctx context.Context) error {
		if lease != nil {
			select {
			case <-lease.Lost(): // judged now: a replica woken from a pause must not go on
				return errLockLost
			default:
			}
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			defer cancel(nil)
			defer context.AfterFunc(lease.Context(), func() { cancel(errLockLost) })()
		}
		if e.cfg.WorkDelay <= 0 {
			return nil
		}
		t := time.NewTimer(e.cfg.WorkDelay)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), errLockLost) {
				return errLockLost
			}
			return ctx.Err()
		}
	}
}

var (
	// errLockUnavailable: the change's locks could not be taken by its lock deadline.
	errLockUnavailable = errors.New("lock not acquired")
	// errLockLost aborts a change whose lease (or fleet pass) was lost before commit.
	errLockLost = errors.New("lock lost before commit")
)
