package order

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/zkstock/zkstock/dlock/fleet"
)

// The fleet: every replica of one FLEET runs the fleet's lock mode, kept in ZooKeeper under
// FleetRoot/<FLEET>, and a switch of mode is a barrier (package dlock/fleet): no change under the
// new mode begins while any replica still has one open under the old. Each change (a purchase, a
// cart, a cancellation) is admitted by the fleet before it reads its mode, holds its pass until
// it has answered, and checks before its COMMIT that the pass was not lost, as it checks its
// lock. LOCK_MODE only seeds a fleet that has no mode yet.

// FleetRoot is where fleets live: FleetRoot + "/" + FLEET.
const FleetRoot = "/zkstock/fleets"

// errNotAdmitted: a change that reached the lock modes without a pass; a bug, never run unlocked.
var errNotAdmitted = errors.New("order: a change was not admitted by the fleet")

type passKey struct{}

// withPass carries a change's pass to run, which checks it before commit.
func withPass(ctx context.Context, p *fleet.Pass) context.Context {
	return context.WithValue(ctx, passKey{}, p)
}

func passOf(ctx context.Context) *fleet.Pass {
	p, _ := ctx.Value(passKey{}).(*fleet.Pass)
	return p
}

// joinFleet starts this replica's membership of its fleet.
func (s *Server) joinFleet() (*fleet.Member, error) {
	var runnable []string
	for _, lm := range modeTable {
		if s.canRun(lm.name) == nil {
			runnable = append(runnable, string(lm.name))
		}
	}
	return fleet.Join(s.locks, fleet.Config{
		Root: FleetRoot + "/" + s.cfg.Fleet, ID: s.cfg.ReplicaID, Seed: string(s.cfg.LockMode), Modes: runnable,
		CanRun:        func(mode string) error { return s.canRun(LockMode(mode)) },
		SwitchTimeout: s.switchBound(), Log: s.log, NoDrain: planted.switchNoDrain,
	})
}

// canRun says why this replica cannot run a mode, or nil.
func (s *Server) canRun(m LockMode) error {
	lm, err := modeOf(m)
	if err != nil {
		return err
	}
	if lm.needsRedis && s.cfg.RedisAddr == "" {
		return fmt.Errorf("mode %s needs Redis, and this replica has no REDIS_ADDR", m)
	}
	return nil
}

// longestChange bounds one change from admission to answer and the release of its locks. Before
// its deadline, LOCK_TIMEOUT and the transaction budget after it arrived (lockwait.go), it
// waits for the fleet and its locks, reads outside them, and runs its transaction's statements
// and work, in every attempt; no COMMIT is sent after it. Past it run only these, each within a
// bound of its own and counted once: the transaction's last round trip, sent before it (its
// COMMIT, or the ROLLBACK of a transaction that did not commit), within the store's read
// timeout; the settle of an unanswered COMMIT (settleBound); the release of the locks
// (releaseTimeout). A purchase of zk-batch is taken by a batch by its lock deadline and answered
// within batchBound and settleBound after that.
func (s *Server) longestChange() time.Duration {
	return s.cfg.LockTimeout + s.txBudget() + s.store.ReadTimeout() + s.settleBound() + releaseTimeout
}

// switchBound is how long a switch waits for the fleet: every change open when it queued must be
// able to end, and a replica that died holding its place must have lost its session.
func (s *Server) switchBound() time.Duration {
	if s.cfg.SwitchTimeout > 0 {
		return s.cfg.SwitchTimeout
	}
	return s.longestChange() + s.cfg.ZKSessionTimeout
}

// admit lets a change in under the fleet's mode, waiting for a switch under way at most until
// the change's lock deadline. It sets the change's deadlines (changeDeadline): the returned
// context carries the pass and both, and done ends the pass and the context.
func (s *Server) admit(ctx context.Context) (_ context.Context, _ LockMode, done func(), _ error) {
	ctx, end := s.changeDeadline(ctx)
	wctx, cancel := s.lockWait(ctx)
	defer cancel()
	p, err := s.fleet.Enter(wctx)
	if err != nil {
		end()
		if !errors.Is(err, fleet.ErrSwitching) && !errors.Is(err, fleet.ErrClosed) {
			s.log.Debug("the fleet did not admit a change", "err", err) // the member logs its state once, readyz says it
		}
		return ctx, "", nil, err
	}
	return withPass(ctx, p), LockMode(p.Mode().Name), func() { p.Exit(); end() }, nil
}

// fleetError is the answer to a change the fleet did not admit; nothing was sold.
func fleetError(err error) *apiError {
	switch {
	case errors.Is(err, fleet.ErrClosed):
		return newError(http.StatusServiceUnavailable, "shutting_down", "the replica is shutting down; nothing was changed; retry on another")
	case errors.Is(err, fleet.ErrNotMember):
		return newError(http.StatusServiceUnavailable, "not_a_member",
			"this replica's place in the fleet is in doubt (its ZooKeeper session): it changes nothing until it has rejoined; nothing was changed; retry on another")
	case errors.Is(err, errUnknownMode):
		return newError(http.StatusServiceUnavailable, "unknown_mode", "the fleet's lock mode is not one this replica knows; nothing was changed")
	case errors.Is(err, fleet.ErrCannotRun):
		return newError(http.StatusServiceUnavailable, "mode_unavailable", "this replica cannot run the fleet's lock mode (its /readyz says why); nothing was changed; retry on another")
	case errors.Is(err, fleet.ErrSwitching):
		return newError(http.StatusServiceUnavailable, "switching_mode", "the fleet was switching lock modes for longer than LOCK_TIMEOUT; nothing was changed; retry")
	}
	return newError(http.StatusServiceUnavailable, "fleet_unavailable", "the fleet's mode could not be learnt; nothing was changed; retry")
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
