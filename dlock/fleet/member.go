package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

var (
	// ErrNotMember: the member's hold of the barrier is lost or not yet taken (its session is in
	// doubt, or it is joining); it admits nothing until it has rejoined and read the mode again.
	ErrNotMember = errors.New("fleet: not a member now: membership is being (re)established")
	// ErrSwitching: a switch of mode was under way for as long as the caller could wait.
	ErrSwitching = errors.New("fleet: the fleet is switching modes")
	// ErrCannotRun: a member cannot run the mode (it lacks what the mode needs).
	ErrCannotRun = errors.New("fleet: mode cannot run")
	// ErrSwitchTimeout: the barrier was not free within the switch's bound; the mode is unchanged.
	ErrSwitchTimeout = errors.New("fleet: the fleet did not let go of the old mode in time; the mode is unchanged")
	// ErrVersionConflict: the mode's version was not the one the caller expected.
	ErrVersionConflict = errors.New("fleet: the mode's version is not the one expected")
	// ErrSwitchUnknown: the switch's write met a connection error: it may or may not have been
	// applied; Current tells.
	ErrSwitchUnknown = errors.New("fleet: the switch's write was not answered: it may or may not be in force")
	// ErrClosed: the member is leaving or has left.
	ErrClosed = errors.New("fleet: member closed")
)

// Config describes one member of one fleet.
type Config struct {
	// Root is the fleet's ZooKeeper path, say /zkstock/fleets/default; fleets under different
	// roots share nothing.
	Root string
	// ID is the member's name, unique in the fleet (a replica id).
	ID string
	// Seed is the mode a fleet that has none starts in; a fleet that has one keeps it.
	Seed string
	// Modes are the modes this member can run; a switch to another is refused.
	Modes []string
	// CanRun says why this member cannot run a mode it was not asked about in Modes, or nil; it
	// also judges a mode read from ZooKeeper. Default: the mode is one of Modes.
	CanRun func(mode string) error
	// SwitchTimeout bounds how long a switch waits for the fleet to let go of the old mode: at
	// least the longest pass plus the session timeout, so that a member that died holding the
	// barrier cannot make every switch fail. Default 30 s.
	SwitchTimeout time.Duration
	Log           *slog.Logger
	// NoDrain is a planted mistake, for the checker's negative control only: Switch writes the
	// mode without the barrier, and a member takes a new mode at once, its passes under the old
	// one still open. Join refuses it but in a build with the zkstock_lies tag.
	NoDrain bool
}

// Mode is the fleet's mode and its version (the ZooKeeper version of the mode node).
type Mode struct {
	Name    string `json:"mode"`
	Version int32  `json:"version"`
}

type phase int

const (
	// rejoining: no hold to trust; Enter answers ErrNotMember at once.
	rejoining phase = iota
	// serving: Enter admits under the current hold.
	serving
	// switching: a switch is under way; Enter waits for the hold to come back.
	switching
	// closed: Enter answers ErrClosed.
	closed
)

// Member is this process's membership of a fleet. Enter admits work under the fleet's mode.
type Member struct {
	c       *dlock.Client
	cfg     Config
	log     *slog.Logger
	barrier *dlock.RWMutex
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	joined  chan struct{} // closed once the member first serves
	once    sync.Once

	mu       sync.Mutex
	phase    phase
	why      error         // rejoining: why; serving: nil, or why this member cannot run mode
	mode     Mode          // read under hold
	hold     *hold         // the shared hold passes are admitted under
	wake     chan struct{} // closed and replaced whenever phase changes
	inflight int
	idle     chan struct{} // closed when inflight reaches zero, if someone waits for it
}

// Join starts the membership: this process takes its place in the fleet in the background, and
// keeps it (rejoining after a lost session) until Close. Joined waits for it.
// Every node the fleet creates (the root and the paths to it, the mode, the members, the
// barrier's) gets the client's ACL (dlock.WithDigest); the client must have every permission on
// nodes made before with another.
func Join(c *dlock.Client, cfg Config) (*Member, error) {
	if cfg.Root == "" || cfg.Root[0] != '/' || path.Clean(cfg.Root) != cfg.Root || cfg.Root == "/" {
		return nil, fmt.Errorf("fleet: root %q must be a clean absolute path", cfg.Root)
	}
	if cfg.ID == "" || cfg.ID == "." || cfg.ID == ".." || path.Base("/"+cfg.ID) != cfg.ID {
		return nil, fmt.Errorf("fleet: member id %q must be a single path element", cfg.ID)
	}
	if cfg.Seed == "" {
		return nil, errors.New("fleet: a seed mode is required")
	}
	if cfg.NoDrain && !noDrainPlantable {
		return nil, errors.New("fleet: NoDrain, a planted mistake, is taken only by a build with the zkstock_lies tag")
	}
	if cfg.CanRun == nil {
		cfg.CanRun = func(mode string) error {
			for _, m := range cfg.Modes {
				if m == mode {
					return nil
				}
			}
			return fmt.Errorf("%w: %q is not one of this member's modes", ErrCannotRun, mode)
		}
	}
	cfg.SwitchTimeout = cmp.Or(cfg.SwitchTimeout, 30*time.Second)
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Member{c: c, cfg: cfg, log: log.With("fleet", cfg.Root, "member", cfg.ID), barrier: dlock.NewRWMutex(c, cfg.Root+barrierNode),
		done: make(chan struct{}), joined: make(chan struct{}), wake: make(chan struct{}), why: errors.New("joining")}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	go m.run()
	return m, nil
}

func (m *Member) modePath() string    { return m.cfg.Root + modeNode }
func (m *Member) membersPath() string { return m.cfg.Root + membersNode }
func (m *Member) ownPath() string     { return m.membersPath() + "/" + m.cfg.ID }

// Joined waits until the member first serves (it holds the barrier and has read the mode), or ctx
// ends.
func (m *Member) Joined(ctx context.Context) error {
	select {
	case <-m.joined:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("fleet: join %s: %w (last: %w)", m.cfg.Root, ctx.Err(), m.Status())
	}
}

// Status is nil while the member admits work, or why it does not.
func (m *Member) Status() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.phase {
	case serving:
		select {
		case <-m.hold.lost(): // judged now, as Enter judges it
			return notMember(m.hold.why())
		default:
		}
		return m.why
	case switching:
		return ErrSwitching
	case closed:
		return ErrClosed
	}
	return notMember(m.why)
}

// notMember says why the member is not one now, naming ErrNotMember once: the hold's reason
// may already carry it.
func notMember(why error) error {
	switch {
	case why == nil:
		return ErrNotMember
	case errors.Is(why, ErrNotMember):
		return why
	}
	return fmt.Errorf("%w: %w", ErrNotMember, why)
}

// Mode is the mode this member last read under its hold (zero before it first joined).
func (m *Member) Mode() Mode {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mode
}

// hold is one shared hold of the barrier as passes see it: gone when dlock says the lease is lost,
// or when this member revokes it, which it does before it lets any hold go. Passes are waited
// for before that, except when Close gives up waiting: a pass still open then can no longer
// commit, since a switch may go through as soon as the hold's node is deleted.
type hold struct {
	lease   *dlock.Lease
	revoked chan struct{}
	revoke  func()
	gone    chan struct{} // closed once the lease is lost or the hold revoked
	ctx     context.Context
}

func newHold(l *dlock.Lease) *hold {
	h := &hold{lease: l, revoked: make(chan struct{}), gone: make(chan struct{})}
	h.revoke = sync.OnceFunc(func() { close(h.revoked) })
	ctx, cancel := context.WithCancelCause(context.Background())
	h.ctx = ctx
	go func() { // one per hold, not per pass; it ends at the latest when the hold is released
		select {
		case <-l.Lost():
			cancel(fmt.Errorf("%w: %w", ErrNotMember, l.Err()))
		case <-h.revoked:
			cancel(errRevoked)
		}
		close(h.gone)
	}()
	return h
}

// why says why the hold is gone. Its context's cause is set by the hold's watcher, which may not
// have run yet when lost() judged the hold gone a moment earlier: the reason is then judged here
// as lost() judges it.
func (h *hold) why() error {
	if err := context.Cause(h.ctx); err != nil {
		return err
	}
	if err := h.lease.Err(); err != nil {
		return err
	}
	select {
	case <-h.revoked:
		return errRevoked
	default:
	}
	return errors.New("the hold is gone")
}

// errRevoked is why a hold this member let go is gone.
var errRevoked = fmt.Errorf("%w: the member let its hold go", ErrNotMember)

// lost is closed when the hold can no longer be trusted, judged now: as dlock judges its lease,
// and gone as soon as the member revoked it, whether or not the hold's watcher has run yet.
func (h *hold) lost() <-chan struct{} {
	select {
	case <-h.lease.Lost():
		return h.lease.Lost()
	case <-h.revoked:
		return h.revoked
	default:
		return h.gone
	}
}

// Pass is one admitted unit of work under the fleet's mode. Exit ends it; a switch waits for it.
type Pass struct {
	m    *Member
	mode Mode
	hold *hold
	once sync.Once
}

// Mode is the mode the work runs under.
func (p *Pass) Mode() Mode { return p.mode }

// Lost is closed when the hold the pass was admitted under can no longer be trusted (lost with
// the session, or let go by a member that stopped waiting for the pass): work that has not
// committed by then must not.
func (p *Pass) Lost() <-chan struct{} { return p.hold.lost() }

// Context is cancelled when the hold can no longer be trusted.
func (p *Pass) Context() context.Context { return p.hold.ctx }

// Exit ends the pass; a second call does nothing.
func (p *Pass) Exit() {
	p.once.Do(func() {
		m := p.m
		m.mu.Lock()
		defer m.mu.Unlock()
		m.inflight--
		if m.inflight == 0 && m.idle != nil {
			close(m.idle)
			m.idle = nil
		}
	})
}

// Enter admits one unit of work under the fleet's mode. While a switch is under way it waits
// (until ctx ends: then an error wrapping ErrSwitching and ctx's error); a member whose
// membership is in doubt answers ErrNotMember at once, and one that cannot run the fleet's mode
// answers why (wrapping ErrCannotRun).
func (m *Member) Enter(ctx context.Context) (*Pass, error) {
	for {
		m.mu.Lock()
		switch m.phase {
		case serving:
			select {
			case <-m.hold.lost(): // judged now: the watcher may not have run yet
				m.mu.Unlock()
				return nil, notMember(m.hold.why())
			default:
			}
			if m.why != nil {
				err := m.why
				m.mu.Unlock()
				return nil, err
			}
			m.inflight++
			p := &Pass{m: m, mode: m.mode, hold: m.hold}
			m.mu.Unlock()
			return p, nil
		case rejoining:
			err := m.why
			m.mu.Unlock()
			return nil, notMember(err)
		case closed:
			m.mu.Unlock()
			return nil, ErrClosed
		}
		wake := m.wake
		m.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrSwitching, ctx.Err())
		}
	}
}

// setPhase moves to p and wakes every Enter that waits (under mu).
func (m *Member) setPhaseLocked(p phase, why error) {
	if m.phase == closed {
		return
	}
	m.phase, m.why = p, why
	close(m.wake)
	m.wake = make(chan struct{})
}

func (m *Member) setPhase(p phase, why error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setPhaseLocked(p, why)
}

// waitIdle waits until no pass is open, or ctx ends.
func (m *Member) waitIdle(ctx context.Context) error {
	m.mu.Lock()
	if m.inflight == 0 {
		m.mu.Unlock()
		return nil
	}
	if m.idle == nil {
		m.idle = make(chan struct{})
	}
	idle := m.idle
	m.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops admitting (Enter answers ErrClosed), waits until the passes open have ended or ctx
// ends, and leaves the fleet: its hold and its member node are deleted.
func (m *Member) Close(ctx context.Context) error {
	m.setPhase(closed, ErrClosed)
	err := m.waitIdle(ctx)
	if err != nil {
		err = fmt.Errorf("fleet: leave with work still open: %w", err)
	}
	m.cancel()
	<-m.done
	return err
}

// run keeps the membership until Close: one hold after another.
func (m *Member) run() {
	defer close(m.done)
	backoff := 50 * time.Millisecond
	for m.ctx.Err() == nil {
		err := m.serveOnce()
		if m.ctx.Err() != nil {
			break
		}
		if err == nil {
			backoff = 50 * time.Millisecond
			continue
		}
		m.log.Warn("fleet membership in doubt: rejoining", "err", err, "retry_in", backoff.String())
		select {
		case <-time.After(backoff):
		case <-m.ctx.Done():
		}
		backoff = min(2*backoff, time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := dlock.Do(ctx, m.c, func(conn *zk.Conn) (struct{}, error) { return struct{}{}, conn.Delete(m.ownPath(), -1) }); err != nil &&
		!errors.Is(err, zk.ErrNoNode) && !errors.Is(err, dlock.ErrClosed) {
		m.log.Debug("fleet: delete member node on leaving", "err", err)
	}
}

// why the member let go of a hold
type letGo int

const (
	writerQueued letGo = iota // a switch waits for the barrier
	modeChanged               // the mode node changed under the hold (written without the barrier)
	holdLost
	leaving
	drained    // no pass is open: the hold may go
	writerGone // the switch that waited gave up
)

// serveOnce takes one shared hold, serves under it, and lets it go: when a switch waits (nil),
// or when the hold is lost (an error).
func (m *Member) serveOnce() error {
	ctx := m.ctx
	if err := m.register(ctx, memberRecord{Modes: m.cfg.Modes}); err != nil {
		m.setPhase(rejoining, err)
		return err
	}
	lease, err := m.barrier.RLock(ctx)
	if err != nil {
		m.setPhase(rejoining, err)
		return fmt.Errorf("fleet: take the barrier: %w", err)
	}
	h := newHold(lease)
	defer m.release(h)
	mode, modeWatch, err := m.readMode(ctx, true)
	if err != nil {
		m.setPhase(rejoining, err)
		return err
	}
	cannot := m.cfg.CanRun(mode.Name)
	if cannot != nil {
		m.log.Warn("fleet: this member cannot run the fleet's mode; it serves nothing until the mode changes", "mode", mode.Name, "err", cannot)
		cannot = fmt.Errorf("%w: the fleet runs %q: %w", ErrCannotRun, mode.Name, cannot)
	}
	rec := memberRecord{Modes: m.cfg.Modes, Mode: mode.Name, Version: mode.Version, Serving: cannot == nil}
	if cannot != nil {
		rec.Why = cannot.Error()
	}
	if err := m.register(ctx, rec); err != nil {
		m.setPhase(rejoining, err)
		return err
	}
	m.mu.Lock()
	if m.phase == closed {
		m.mu.Unlock()
		<-ctx.Done() // Close is waiting for the passes: hold on until it leaves
		return nil
	}
	m.mode, m.hold = mode, h
	m.setPhaseLocked(serving, cannot)
	m.mu.Unlock()
	m.once.Do(func() { close(m.joined) })
	m.log.Info("fleet: serving", "mode", mode.Name, "version", mode.Version)

	why := m.awaitSwitch(ctx, h, modeWatch)
	for {
		switch why {
		case holdLost:
			return m.lose(ctx, h)
		case leaving:
			return nil
		case modeChanged:
			if m.cfg.NoDrain {
				why = m.adoptUndrained(ctx, h)
				continue
			}
		}
		m.setPhase(switching, nil)
		switch m.drain(ctx, h, why == writerQueued) {
		case holdLost:
			return m.lose(ctx, h)
		case writerGone:
			// The switch gave up (its bound, or its caller) before it held the barrier, so the
			// mode cannot have changed: serve again under the same hold rather than wait for a
			// pass that may take long (an unknown outcome being settled).
			m.log.Info("fleet: the switch that waited gave up; serving again", "mode", mode.Name)
			m.setPhase(serving, cannot)
			why = m.awaitSwitch(ctx, h, modeWatch)
			continue
		}
		return nil // drained, or leaving: the hold goes
	}
}

// lose handles a lost hold: no admission until the member has rejoined, and not before its own
// passes have ended (they fail their checks before they commit), so that its own work never
// spans two modes either.
func (m *Member) lose(ctx context.Context, h *hold) error {
	cause := context.Cause(h.ctx)
	m.setPhase(rejoining, cause)
	_ = m.waitIdle(ctx)
	return fmt.Errorf("fleet: hold lost: %w", cause)
}

// drain waits, while a switch waits, until no pass is open (drained), the hold is lost, the
// member leaves, or (with recallable) the writers have all left the barrier (writerGone).
func (m *Member) drain(ctx context.Context, h *hold, recallable bool) letGo {
	idle := make(chan struct{})
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		if m.waitIdle(waitCtx) == nil {
			close(idle)
		}
	}()
	gone := make(chan struct{})
	if recallable {
		go func() {
			if m.watchBarrier(waitCtx, h, false) == writerGone {
				close(gone)
			}
		}()
	}
	select {
	case <-idle:
		return drained
	case <-h.lost():
		return holdLost
	case <-gone:
		return writerGone
	case <-ctx.Done():
		return leaving
	}
}

// release revokes a hold, then lets it go.
func (m *Member) release(h *hold) {
	h.revoke()
	m.unlock(h.lease)
}

// unlock lets a lease of the barrier go with a context of its own: Close cancels the member's.
func (m *Member) unlock(l *dlock.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.Unlock(ctx); err != nil && !errors.Is(err, dlock.ErrLost) && !errors.Is(err, dlock.ErrReleasePending) {
		m.log.Warn("fleet: release the barrier", "err", err)
	}
}

// awaitSwitch serves until a writer queues at the barrier, the mode node changes, the hold is
// lost, or the member leaves.
func (m *Member) awaitSwitch(ctx context.Context, h *hold, modeWatch <-chan zk.Event) letGo {
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	writer := make(chan letGo, 1)
	go func() { writer <- m.watchBarrier(watchCtx, h, true) }()
	select {
	case why := <-writer:
		return why
	case <-modeWatch:
		return modeChanged
	}
}

// watchBarrier waits until a writer is queued at the barrier (queued true: writerQueued) or none
// is (queued false: writerGone), the hold is lost, or ctx ends (leaving). The children are read
// and watched in one request, so that a change between a read and a watch cannot be missed.
func (m *Member) watchBarrier(ctx context.Context, h *hold, queued bool) letGo {
	for {
		type kidsW struct {
			kids []string
			ch   <-chan zk.Event
		}
		r, err := dlock.Do(ctx, m.c, func(conn *zk.Conn) (kidsW, error) {
			kids, _, ch, err := conn.ChildrenW(m.barrier.Path())
			return kidsW{kids, ch}, err
		})
		if err != nil {
			m.log.Debug("fleet: watch the barrier", "err", err)
			select {
			case <-h.lost():
				return holdLost
			case <-ctx.Done():
				return leaving
			case <-time.After(100 * time.Millisecond):
				continue
			}
		}
		writers := false
		for _, n := range nodename.Queue(r.kids) {
			writers = writers || n.Kind.Exclusive()
		}
		switch {
		case queued && writers:
			return writerQueued
		case !queued && !writers:
			return writerGone
		}
		select {
		case <-r.ch:
		case <-h.lost():
			return holdLost
		case <-ctx.Done():
			return leaving
		}
	}
}
