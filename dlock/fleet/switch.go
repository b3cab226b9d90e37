package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
)

// AnyVersion, as Switch's expected version, switches whatever the mode's version is.
const AnyVersion int32 = -1

// Switch makes to the fleet's mode, through the barrier (see the package comment), and returns
// the mode as it then is. With expect other than AnyVersion it switches only if the mode's
// version is expect (ErrVersionConflict otherwise): a compare-and-set for callers that read the
// mode first. Two switches at once are served one after the other, in the barrier's order, and
// each is written with the version it read, so neither is lost.
//
// A mode that this member or any member now in the fleet cannot run is refused before anything
// is queued (ErrCannotRun). When the fleet does not let go of the old mode within SwitchTimeout,
// the switch gives up (ErrSwitchTimeout) and the mode is unchanged. A switch already in force
// answers at once without the barrier.
//
// An error that wraps ErrSwitchUnknown (ZooKeeper unreachable at the moment of the write) leaves
// the outcome for Current to tell.
//
// While a switch waits, the whole fleet stops admitting: a switcher that stops (a crash, a pause)
// holding the barrier stalls the fleet until its session ends. Never call Switch while holding a
// Pass of the same member: the switch would wait for it until SwitchTimeout.
func (m *Member) Switch(ctx context.Context, to string, expect int32) (Mode, error) {
	if err := m.cfg.CanRun(to); err != nil {
		return Mode{}, fmt.Errorf("%w: %s cannot run %q: %w", ErrCannotRun, m.cfg.ID, to, err)
	}
	members, err := m.Members(ctx)
	if err != nil {
		return Mode{}, err
	}
	for _, mi := range members {
		if !slices.Contains(mi.Modes, to) {
			return Mode{}, fmt.Errorf("%w: member %s cannot run %q (it runs %v)", ErrCannotRun, mi.ID, to, mi.Modes)
		}
	}
	cur, err := m.Current(ctx)
	if err != nil {
		return Mode{}, err
	}
	if done, err := settledAt(cur, to, expect); done || err != nil {
		return cur, err
	}

	if m.cfg.NoDrain {
		return m.switchUndrained(ctx, cur, to)
	}
	bctx, cancel := context.WithTimeout(ctx, m.cfg.SwitchTimeout)
	defer cancel()
	started := time.Now()
	w, err := m.barrier.Lock(bctx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return cur, fmt.Errorf("%w (waited %v for %s)", ErrSwitchTimeout, m.cfg.SwitchTimeout, m.cfg.Root)
		}
		return cur, fmt.Errorf("fleet: switch: take the barrier: %w", err)
	}
	defer m.unlock(w)
	// Read again under the barrier: another switch may have gone first.
	cur, _, err = m.readMode(ctx, false)
	if err != nil {
		return cur, err
	}
	if done, err := settledAt(cur, to, expect); done || err != nil {
		return cur, err
	}
	// The write applies only while this writer's node exists: a writer whose session ended
	// while it waited (and whose members may already serve again) writes nothing.
	_, err = dlock.Do(ctx, m.c, func(conn *zk.Conn) ([]zk.MultiResponse, error) {
		return conn.Multi(
			&zk.CheckVersionRequest{Path: w.Node(), Version: -1},
			&zk.SetDataRequest{Path: m.modePath(), Data: []byte(to), Version: cur.Version},
		)
	})
	switch {
	case err == nil:
	case isConnectionError(err), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, dlock.ErrClosed):
		return cur, fmt.Errorf("%w: switch to %q: %w", ErrSwitchUnknown, to, err)
	default: // ZooKeeper's own answer: the writer's node was gone (ErrNoNode), or the version moved
		return cur, fmt.Errorf("fleet: switch to %q: ZooKeeper refused the write, nothing changed: %w", to, err)
	}
	next := Mode{Name: to, Version: cur.Version + 1}
	m.log.Info("fleet: mode switched", "from", cur.Name, "to", to, "version", next.Version, "barrier_wait", time.Since(started).String())
	return next, nil
}

// isConnectionError: after these a request may or may not have been applied.
func isConnectionError(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionExpired) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrClosing)
}

// settledAt says whether a switch to `to` has nothing to do at cur, or may not be made.
func settledAt(cur Mode, to string, expect int32) (bool, error) {
	if expect != AnyVersion && cur.Version != expect {
		return false, fmt.Errorf("%w: it is %d, not %d", ErrVersionConflict, cur.Version, expect)
	}
	return cur.Name == to, nil
}
