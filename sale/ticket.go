package sale

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkstock/zkstock/dlock/fleet"
)

// Ticket is one change admitted by the fleet (Admit): the fleet's pass, which the change holds
// until it is answered and checks before its COMMIT as it checks its locks; the row of the mode
// the pass admitted it in, read once; and its lock deadline. A zero Ticket admits nothing.
//
// A change's time is bounded by two deadlines, both set when it arrives:
//   - its lock deadline, LOCK_TIMEOUT after it arrived: its wait for the fleet to admit it (a
//     switch under way), for its locks, and for them again when it queues a second time (a
//     purchase sent away by the sold-out poller whose key could not be looked up; the retry
//     after a stale token) all end by it;
//   - its deadline, the transaction budget (txBudget) after the lock deadline: the context's
//     own. Everything else the change does before its COMMIT ends by it: its reads outside the
//     locks, its transaction's statements and work (Hooks.Deadline), in every attempt. A
//     transaction cut off by it has sent no COMMIT: it rolls back, and nothing was changed.
//
// Only the COMMIT, the settle of an unanswered one and the release of the locks run past the
// deadline, each within a bound of its own (LongestChange).
type Ticket struct {
	pass         *fleet.Pass
	mode         lockMode
	lockDeadline time.Time
}

// Mode is the lock mode the change runs in.
func (t Ticket) Mode() LockMode { return t.mode.name }

// errNotAdmitted: a change that reached the lock modes without a ticket; a bug, never run unlocked.
var errNotAdmitted = errors.New("sale: a change was not admitted by the fleet")

// Admit lets a change in under the fleet's mode, waiting for a switch under way at most until the
// change's lock deadline: LOCK_TIMEOUT from now, or sooner when ctx's deadline (HoldPurchase's,
// from the change's arrival) leaves less before the transaction budget. The returned context ends at the change's deadline; done ends the pass
// and the context, once the change is answered. A change the fleet does not admit, or admits in a
// mode this engine does not know, gets an *Error (nothing was changed).
func (e *Engine) Admit(ctx context.Context, m *fleet.Member) (_ context.Context, _ Ticket, done func(), _ error) {
	lockDeadline := time.Now().Add(e.cfg.LockTimeout)
	if d, ok := ctx.Deadline(); ok && d.Add(-e.txBudget()).Before(lockDeadline) {
		lockDeadline = d.Add(-e.txBudget()) // the change's deadline from its arrival (HoldPurchase)
	}
	ctx, end := context.WithDeadline(ctx, lockDeadline.Add(e.txBudget()))
	wctx, cancel := context.WithDeadline(ctx, lockDeadline)
	defer cancel()
	p, err := m.Enter(wctx)
	if err != nil {
		end()
		if !errors.Is(err, fleet.ErrSwitching) && !errors.Is(err, fleet.ErrClosed) {
			e.log.Debug("the fleet did not admit a change", "err", err) // the member logs its state once, readyz says it
		}
		return ctx, Ticket{}, nil, &Error{Kind: admissionKind(err), Err: err}
	}
	lm, err := modeOf(LockMode(p.Mode().Name))
	if err != nil {
		p.Exit()
		end()
		return ctx, Ticket{}, nil, &Error{Kind: KindUnknownMode, Err: err}
	}
	return ctx, Ticket{pass: p, mode: lm, lockDeadline: lockDeadline}, func() { p.Exit(); end() }, nil
}

// stillAdmitted is the check before commit of a change's pass: a replica whose place in the
// fleet was lost may be behind a switch.
func stillAdmitted(p *fleet.Pass) func() error {
	return func() error {
		select {
		case <-p.Lost():
			return fmt.Errorf("%w: %w", errLockLost, fleet.ErrNotMember)
		default:
			return nil
		}
	}
}

// txStatements is the part of the transaction budget for the statements of a transaction, all
// together, before its COMMIT: its waits for row locks included (the lock of db-forupdate and
// db-cas). A healthy change's take milliseconds (a cart of MaxCartItems, changeRoundTrips); a
// database that stalls mid-transaction is given up on after this, not after a read timeout per
// round trip.
const txStatements = 5 * time.Second

// txBudget is the time a change has for its transaction beyond its lock waits: its work
// (WORK_DELAY) and txStatements.
func (e *Engine) txBudget() time.Duration { return e.cfg.WorkDelay + txStatements }

// LongestChange bounds one change from admission to answer and the release of its locks. Before
// its deadline (Ticket) it waits for the fleet and its locks, reads outside them, and runs its
// transaction's statements and work, in every attempt; no COMMIT is sent after it. Past it run
// only these, each within a bound of its own and counted once: the transaction's last round trip,
// sent before it (its COMMIT, or the ROLLBACK of a transaction that did not commit), within the
// store's read timeout; the settle of an unanswered COMMIT (settleBound); the release of the
// locks (releaseTimeout). A purchase of zk-batch is taken by a batch by its lock deadline and
// answered within batchBound, settleBound and releaseTimeout after that (its answer is sent once
// the batch's lock is released).
func (e *Engine) LongestChange() time.Duration {
	return e.cfg.LockTimeout + e.txBudget() + e.store().ReadTimeout() + e.settleBound() + releaseTimeout
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
