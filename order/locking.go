package order

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/fleet"
	"github.com/zkstock/zkstock/inventory"
)

// change is one change of stock (a sale, a cart, a cancellation) as every lock mode runs it.
type change struct {
	skus []string // the SKUs it changes, distinct
	// apply runs the change in one transaction, protected as m says, with fences from the
	// mode's locks (Fenced) and hooks that run the critical section's work and check the locks.
	apply func(ctx context.Context, m inventory.Mode, fences fencing, hooks inventory.Hooks) error
	// resolve learns what became of a change whose COMMIT went unanswered, by its key: nil when
	// it applied (it also records the result), errNotCommitted when it did not, errOutcomeUnknown
	// when the database could not be asked within resolveBudget.
	resolve func(ctx context.Context, cause error) error
	// sale, when the change is one purchase, lets it leave the lock's queue with out_of_stock
	// when a read of the stock shows the product sold out while it waits (soldout.go).
	sale *inventory.Purchase
}

// fencing is the holding's tokens and who issued them.
type fencing struct {
	issuer inventory.Issuer
	tokens map[string]int64 // per SKU; nil in the modes without tokens
}

// run runs a change under its mode's row of the table: the one dispatch of lock modes. The change
// was admitted by the fleet (admit: ctx carries its pass), and runs the mode of its pass. The
// locks are taken in sorted order, so that two changes that share SKUs cannot each hold what the
// other waits for; they span the whole transaction, and an unanswered COMMIT is settled before
// they are released.
func (s *Server) run(ctx context.Context, log requestLog, ch change) error {
	pass := passOf(ctx)
	if pass == nil {
		return errNotAdmitted
	}
	lm, err := modeOf(LockMode(pass.Mode().Name))
	if err != nil {
		return err
	}
	sorted := slices.Sorted(slices.Values(ch.skus))
	err = s.runOnce(ctx, lm, pass, sorted, log, ch)
	// A second attempt only before the change's deadline: none runs past it (longestChange).
	if lm.repairStale != nil && errors.Is(err, inventory.ErrStaleToken) && ctx.Err() == nil && lm.repairStale(s, ctx, sorted, log) && ctx.Err() == nil {
		err = s.runOnce(ctx, lm, pass, sorted, log, ch) // the refusal wrote nothing
	}
	return err
}

func (s *Server) runOnce(ctx context.Context, lm lockMode, pass *fleet.Pass, sorted []string, log requestLog, ch change) error {
	admitted := stillAdmitted(pass)
	if lm.lock == nil {
		tctx, deadline, end := txContext(ctx)
		defer end()
		err := ch.apply(tctx, lm.protect, fencing{}, inventory.Hooks{Work: s.work(pass), BeforeCommit: admitted, Deadline: deadline})
		return s.settle(tctx, ch, err, log)
	}
	var held holding
	return s.withLock(ctx, log, func(lockCtx context.Context) (release, error) {
		waitCtx, queued := lockCtx, func() {}
		if ch.sale != nil {
			waitCtx, queued = s.soldOut.queue(lockCtx, ch.sale.SKU, ch.sale.Qty)
		}
		h, err := s.lockBehindGate(waitCtx, lm, sorted, ch.sale)
		queued()
		if err != nil {
			return nil, s.leftQueue(waitCtx, err)
		}
		held = h
		return h.Unlock, nil
	}, func() error {
		tctx, deadline, end := txContext(ctx)
		defer end()
		err := ch.apply(tctx, lm.protect, fencing{issuer: lm.issuer, tokens: held.Tokens()},
			inventory.Hooks{Work: s.work(held), BeforeCommit: func() error { return errors.Join(stillHeld(held)(), admitted()) }, Deadline: deadline})
		return s.settle(tctx, ch, err, log)
	})
}

// lockBehindGate takes the mode's locks; a sale first passes its SKU's gate (lockgate.go), which
// keeps the lock queue here no longer than the stock.
func (s *Server) lockBehindGate(ctx context.Context, lm lockMode, sorted []string, sale *inventory.Purchase) (holding, error) {
	if sale == nil {
		return lm.lock(s, ctx, sorted)
	}
	passed, err := s.gate.enter(ctx, sale.SKU, sale.Qty)
	if err != nil {
		return nil, err
	}
	defer passed()
	return lm.lock(s, ctx, sorted)
}

// settle resolves an unanswered COMMIT while the locks are still held: released before, a later
// holder's plain read could miss a COMMIT that applies after it and overwrite it (the lock modes
// without a fence). The resolver ends the transaction before it asks (EndTransaction), so the
// answer is nearly always known. When it is not, the locks are kept while the server still shows
// the transaction's connection (a COMMIT stuck executing there can apply at any time), for at
// most the store's commit bound (waitWhileAlive), then asked again; and when the server cannot be
// asked either, until the commit bound has passed since the COMMIT, after which a COMMIT not yet
// on the server can no longer apply. The answer is outcome_unknown only then. It takes at most
// settleBound.
func (s *Server) settle(ctx context.Context, ch change, err error, log requestLog) error {
	if !errors.Is(err, inventory.ErrOutcomeUnknown) {
		return err
	}
	unanswered := time.Now() // the COMMIT was sent before this
	log.Warn("commit unanswered: asking the database what became of it before the lock is released", "err", err)
	rerr := ch.resolve(ctx, err)
	if errors.Is(rerr, errOutcomeUnknown) && s.waitWhileAlive(ctx, inventory.UnansweredConn(err), log) {
		rerr = ch.resolve(ctx, err)
	}
	if errors.Is(rerr, errOutcomeUnknown) {
		wait := time.Until(unanswered.Add(s.store.CommitBound()))
		log.Warn("outcome unknown: keeping the lock until the commit can no longer apply", "wait", wait.String())
		if wait > 0 {
			time.Sleep(wait)
		}
	}
	if planted.unconfirmedNotSold {
		return errPlantedNotSold
	}
	return rerr
}

// settleBound is the longest settle (and the batcher's settle) takes: a look-up within
// resolveBudget, the wait for the connection (waitWhileAlive), and a second look-up; or the
// commit bound, which is shorter.
func (s *Server) settleBound() time.Duration { return 2*resolveBudget + s.aliveBound() }

// alivePoll is how often waitWhileAlive looks at the connection.
const alivePoll = 200 * time.Millisecond

// aliveBound bounds waitWhileAlive: the store's commit bound, then one more look at the
// connection, and the pause before it.
func (s *Server) aliveBound() time.Duration {
	return s.store.CommitBound() + alivePoll + releaseTimeout
}

// waitWhileAlive waits while the server shows the connection conn, on which a COMMIT went
// unanswered, and says whether it saw it gone: then the transaction has ended, and its key's
// orders are final. It gives up (false) when the server cannot be asked, or when the connection
// is still there after the store's commit bound: a COMMIT the resolver's KILL could not stop
// that long is left to the answer outcome_unknown. It takes at most aliveBound.
func (s *Server) waitWhileAlive(ctx context.Context, conn inventory.ServerConn, log requestLog) bool {
	if conn.ID == 0 {
		return false
	}
	for deadline := time.Now().Add(s.store.CommitBound()); ; {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		alive, err := s.store.ConnectionAlive(actx, conn)
		cancel()
		switch {
		case err != nil:
			log.Warn("the unanswered transaction's connection could not be looked up", "err", err)
			return false
		case !alive:
			return true
		case !time.Now().Before(deadline):
			log.Warn("the unanswered transaction is still alive on the server past the commit bound: its outcome is unknown", "conn", conn.ID)
			return false
		}
		time.Sleep(alivePoll)
	}
}

// release gives a lock back.
type release func(context.Context) error

// withLock is the frame of every locked change: acquire by the change's lock deadline (lockWait),
// run critical, then
// release on every path (an early return, an error, a panic) with a context the caller cannot
// cancel, so that a client who hangs up does not leave the lock held. The wait and the hold are
// timed for the metrics.
func (s *Server) withLock(ctx context.Context, log requestLog, acquire func(context.Context) (release, error), critical func() error) error {
	waitStart := time.Now()
	lockCtx, cancel := s.lockWait(ctx)
	var rel release
	err := lockCtx.Err() // a lock deadline passed already: no wait begins
	if err == nil {
		rel, err = acquire(lockCtx)
	}
	cancel()
	s.metrics.lockWait.Observe(time.Since(waitStart).Seconds())
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
		s.metrics.lockHold.Observe(time.Since(heldSince).Seconds())
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
func (s *Server) work(lease leaseState) func(context.Context) error {
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
		if s.cfg.WorkDelay <= 0 {
			return nil
		}
		t := time.NewTimer(s.cfg.WorkDelay)
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

var errLockUnavailable = errors.New("lock not acquired")
