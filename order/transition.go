package order

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// Switching lock modes while purchases run. A mode's lock excludes only the holders of the same
// lock service: for a while after a switch, the purchases this replica began under the old mode,
// and those of replicas not yet switched, still run under the old mode's lock (or, in the db
// modes, under none), and a holder of the new mode's lock alone would not wait for them. Where
// neither side is fenced (zk-unfenced, redis, db-locktable), a plain read of one would miss the
// other's write, and overwrite it: Porcupine found exactly that after redis-fenced → zk-unfenced.
//
// So for a transition window after a switch every change takes the locks of every lock service
// used in the window, in one canonical order of services (so that two replicas switching in
// opposite directions cannot each hold what the other waits for), and a change that would trust
// its lock alone reads its rows with locks instead (ForUpdate), which makes a writer without the
// lock (db-cas) wait. Single purchases are not batched during the window: a batch takes one lock.
// The window ends as soon as the fleet has settled: every replica that announced itself in the
// last few seconds runs this replica's mode and has no change in flight under another one (each
// replica counts its changes by mode, and announces when it settles). Until then, and at most,
// it outlasts a holder of the old mode here (the lock wait, the work and an unknown outcome's
// settling); replicas must be switched within it, as loadtest and the tutorials do. A replica
// that stopped announcing (down, or paused for longer than fleetSeen) is not waited for.

// lockService is who a mode's lock is kept by; modes of one service exclude each other.
type lockService int

const (
	serviceNone      lockService = iota // the database's rows only: none, db-forupdate, db-cas
	serviceZooKeeper                    // one queue per lock path, whichever recipe wrote its nodes
	serviceRedis                        // one key per SKU, fenced or not
	serviceTable                        // one row of table_locks per SKU
)

// modeSwitch is a switch away from a mode, when it happened.
type modeSwitch struct {
	from LockMode
	at   time.Time
}

// switches remembers the switches of the transition window, and the changes in flight by mode.
type switches struct {
	mu       sync.Mutex
	list     []modeSwitch
	inflight map[LockMode]int
}

// begin counts a change in flight under mode; the returned func ends it and says whether that
// left no change in flight under a mode other than current (the replica just settled).
func (w *switches) begin(mode LockMode) (end func(current LockMode) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inflight == nil {
		w.inflight = map[LockMode]int{}
	}
	w.inflight[mode]++
	return func(current LockMode) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.inflight[mode]--
		if w.inflight[mode] == 0 {
			delete(w.inflight, mode)
		}
		return mode != current && w.settledIn(current)
	}
}

// settledIn says whether no change is in flight under a mode other than current (under mu).
func (w *switches) settledIn(current LockMode) bool {
	for m := range w.inflight {
		if m != current {
			return false
		}
	}
	return true
}

// clear ends the window.
func (w *switches) clear() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = nil
}

func (w *switches) add(from LockMode, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, modeSwitch{from: from, at: at})
}

// since is the modes switched away from after t, forgetting older switches.
func (w *switches) since(t time.Time) []LockMode {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = slices.DeleteFunc(w.list, func(s modeSwitch) bool { return s.at.Before(t) })
	var out []LockMode
	for _, s := range w.list {
		out = append(out, s.from)
	}
	return out
}

// transitionWindow is how long after a switch the old mode's holders may still run here: the
// longest lock wait, the work, an unknown outcome's settling and a margin.
func (s *Server) transitionWindow() time.Duration {
	return s.cfg.LockTimeout + s.cfg.WorkDelay + resolveBudget + s.store.CommitBound() + 2*releaseTimeout
}

// switchMode makes m this replica's mode, and opens a transition window when it changes. The
// read of the old mode, its record and the store are one step, so that two switches at once
// both leave their old modes in the window.
func (s *Server) switchMode(m LockMode) {
	s.switching.Lock()
	defer s.switching.Unlock()
	if old := s.Mode(); old != m {
		s.switched.add(old, time.Now())
		s.log.Info("lock mode switched: a transition window opens; switch every replica within it",
			"from", old, "to", m, "window", s.transitionWindow().String())
	}
	s.mode.Store(m)
}

// beginChange counts a change in flight under mode until the returned func is called; a replica
// that settles by it announces so at once, so that the others' windows can end.
func (s *Server) beginChange(mode LockMode) func() {
	end := s.switched.begin(mode)
	return func() {
		if end(s.Mode()) {
			select {
			case s.modeChanged <- struct{}{}:
			default:
			}
		}
	}
}

// settled is this replica's mode, and whether no change is in flight under another mode.
func (s *Server) settled() (LockMode, bool) {
	s.switched.mu.Lock()
	defer s.switched.mu.Unlock()
	m := s.Mode()
	return m, s.switched.settledIn(m)
}

// fleetSeen is how recently a replica must have announced itself to be waited for; replicas
// announce every announceTick, and at once when they switch or settle.
const fleetSeen = 2*announceTick + time.Second

// fleetSettledIn says whether every replica seen lately runs mode and has settled, from a read of
// the replicas' announcements at most fleetCheckEvery old.
func (s *Server) fleetSettledIn(mode LockMode) bool {
	s.fleetMu.Lock()
	refresh := time.Since(s.fleetAt) > fleetCheckEvery
	if refresh {
		s.fleetAt = time.Now() // this caller reads; the others go on with what was read before
	}
	fleet := s.fleet
	s.fleetMu.Unlock()
	if refresh {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		rs, err := s.store.Replicas(ctx, fleetSeen)
		cancel()
		if err != nil {
			rs = nil // not known: the window goes on
		}
		s.fleetMu.Lock()
		s.fleet, fleet = rs, rs
		s.fleetMu.Unlock()
	}
	if len(fleet) == 0 {
		return false
	}
	for _, r := range fleet {
		if r.Mode != string(mode) || !r.Settled {
			return false
		}
	}
	return true
}

// fleetCheckEvery bounds the reads of the announcements during a window.
const fleetCheckEvery = 100 * time.Millisecond

// rowFor is the row a change runs under now: the mode's own, or during a transition window, the
// mode's row with the locks of every service in the window and row locks for what trusted its lock.
func (s *Server) rowFor(mode LockMode) (lockMode, error) {
	lm, err := modeOf(mode)
	if err != nil || lm.name == ModeNone {
		return lm, err // none promises nothing, in a transition or not
	}
	olds := s.switched.since(time.Now().Add(-s.transitionWindow()))
	if len(olds) == 0 {
		return lm, nil
	}
	if _, here := s.settled(); here && s.fleetSettledIn(mode) {
		s.switched.clear()
		return lm, nil
	}
	locks := map[lockService]func(*Server, context.Context, []string) (holding, error){}
	for _, name := range olds {
		old, err := modeOf(name)
		if err != nil {
			return lockMode{}, err
		}
		if old.lock != nil && locks[old.service] == nil {
			locks[old.service] = old.lock
		}
	}
	if lm.lock != nil {
		locks[lm.service] = lm.lock // the current mode's own recipe issues the tokens
	}
	services := slices.Sorted(maps.Keys(locks))
	t := lm
	if t.protect == inventory.Unfenced {
		t.protect = inventory.ForUpdate
	}
	if len(services) > 0 {
		t.lock = func(s *Server, ctx context.Context, skus []string) (holding, error) {
			st := &stacked{}
			for _, svc := range services {
				h, err := locks[svc](s, ctx, skus)
				if err != nil {
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
					defer cancel()
					return nil, errors.Join(err, st.Unlock(rctx))
				}
				st.add(h, svc == lm.service && lm.lock != nil)
			}
			return st, nil
		}
	}
	return t, nil
}

// stacked is a holding of several lock services' locks, taken in canonical order; the tokens are
// those of the current mode's own lock.
type stacked struct {
	parts   []holding
	primary holding
	ctx     context.Context
	cancel  context.CancelFunc
	stops   []func() bool
}

func (st *stacked) add(h holding, primary bool) {
	if st.ctx == nil {
		st.ctx, st.cancel = context.WithCancel(context.Background())
	}
	st.parts = append(st.parts, h)
	st.stops = append(st.stops, context.AfterFunc(h.Context(), st.cancel))
	if primary {
		st.primary = h
	}
}

func (st *stacked) Tokens() map[string]int64 {
	if st.primary == nil {
		return nil
	}
	return st.primary.Tokens()
}

// Lost asks every part now, then falls back on the context that ends when any part is lost.
func (st *stacked) Lost() <-chan struct{} {
	for _, h := range st.parts {
		select {
		case <-h.Lost():
			st.cancel()
		default:
		}
	}
	return st.ctx.Done()
}

func (st *stacked) Context() context.Context { return st.ctx }

// Unlock releases every part, the last taken first.
func (st *stacked) Unlock(ctx context.Context) error {
	for _, stop := range st.stops {
		stop()
	}
	var errs []error
	for i := len(st.parts) - 1; i >= 0; i-- {
		errs = append(errs, st.parts[i].Unlock(ctx))
	}
	if st.cancel != nil {
		st.cancel()
	}
	return errors.Join(errs...)
}
