package order

import (
	"context"
	"errors"
	"time"
)

// A change's time is bounded by two deadlines, both set when it arrives (admit) and carried in
// its context:
//   - its lock deadline, LOCK_TIMEOUT after it arrived: its wait for the fleet to admit it (a
//     switch under way), for its locks, and for them again when it queues a second time (a
//     purchase sent away by the sold-out poller whose key could not be looked up; the retry
//     after a stale token) all end by it (lockWait);
//   - its deadline, the transaction budget (txBudget) after the lock deadline: the context's
//     own. Everything else the change does before its COMMIT ends by it: its reads outside the
//     locks, its transaction's statements and work (Hooks.Deadline), in every attempt. A
//     transaction cut off by it has sent no COMMIT: it rolls back, and nothing was changed.
//
// Only the COMMIT, the settle of an unanswered one and the release of the locks run past the
// deadline, each within a bound of its own (longestChange).

type lockDeadlineKey struct{}

// withLockDeadline carries the change's lock deadline in ctx.
func withLockDeadline(ctx context.Context, deadline time.Time) context.Context {
	return context.WithValue(ctx, lockDeadlineKey{}, deadline)
}

// lockWait is ctx ended at the change's lock deadline too: every lock wait of the change waits
// within it. A context without a deadline of a change (the batcher's own lease) has LOCK_TIMEOUT
// from now.
func (s *Server) lockWait(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Value(lockDeadlineKey{}).(time.Time)
	if !ok {
		deadline = time.Now().Add(s.cfg.LockTimeout)
	}
	return context.WithDeadline(ctx, deadline)
}

// txStatements is the part of the transaction budget for the statements of a transaction, all
// together, before its COMMIT: its waits for row locks included (the lock of db-forupdate and
// db-cas). A healthy change's take milliseconds (a cart of MaxCartItems, changeRoundTrips); a
// database that stalls mid-transaction is given up on after this, not after a read timeout per
// round trip.
const txStatements = 5 * time.Second

// txBudget is the time a change has for its transaction beyond its lock waits: its work
// (WORK_DELAY) and txStatements.
func (s *Server) txBudget() time.Duration { return s.cfg.WorkDelay + txStatements }

// changeDeadline gives ctx the deadlines of a change arriving now: its lock deadline and its own.
func (s *Server) changeDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	lockDeadline := time.Now().Add(s.cfg.LockTimeout)
	return context.WithDeadline(withLockDeadline(ctx, lockDeadline), lockDeadline.Add(s.txBudget()))
}

// txContext splits a change's context for its transaction. The statements end at the change's
// deadline (deadline, for Hooks.Deadline); the transaction's context carries no deadline, so
// that a COMMIT sent before the deadline is waited for within its own bound (the store's read
// timeout) and an unanswered one is settled within settleBound, not given up at the deadline
// with its outcome unknown. A client who hangs up still cancels it, as it cancels ctx.
func txContext(ctx context.Context) (_ context.Context, deadline time.Time, end func()) {
	deadline, _ = ctx.Deadline()
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel(context.Cause(ctx))
		}
	})
	return tctx, deadline, func() { stop(); cancel(nil) }
}
