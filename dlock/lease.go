package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

// Lease is one holding of a lock, or one re-entry into a holding (see Mutex.Lock). Each Lease
// is released by its own Unlock; the lock's node goes with the last one.
type Lease struct {
	h *holding

	ctx    context.Context // the holding's, cancelled also when this Lease is unlocked
	cancel context.CancelCauseFunc

	once      sync.Once
	unlocked  chan struct{}
	unlockErr error
}

// holding is one lock node held: what every Lease on it shares.
type holding struct {
	c         *Client
	dir       string
	node      string
	owner     int64
	token     int64
	exclusive bool
	gen       *generation
	lost      chan struct{}
	released  chan struct{} // closed when the last Unlock starts, so our own delete is not a loss

	ctx    context.Context // carries the holding for re-entry; cancelled when lost or released
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	lostErr   error
	holds     int
	unlocking bool
}

// errUnlocked is the cause of a Lease's context once the Lease was unlocked.
var errUnlocked = errors.New("dlock: lease unlocked")

type holdingKey struct {
	c   *Client
	dir string
}

func newLease(c *Client, n *ownNode, gen *generation) *Lease {
	h := &holding{
		c: c, dir: n.dir, node: n.path, owner: n.owner, token: n.token, exclusive: n.node.Kind.Exclusive(), gen: gen,
		lost: make(chan struct{}), released: make(chan struct{}), holds: 1,
	}
	h.ctx, h.cancel = context.WithCancelCause(context.WithValue(context.Background(), holdingKey{c, n.dir}, h))
	go h.monitor()
	return h.handle()
}

func (h *holding) handle() *Lease {
	l := &Lease{h: h, unlocked: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancelCause(h.ctx)
	return l
}

// reenter is Lock or RLock on a path whose holding ctx carries: a new Lease on the same node.
// A read holding cannot become a write one: the writer would wait for its own reader.
func (c *Client) reenter(ctx context.Context, dir string, k nodename.Kind) (*Lease, bool, error) {
	h, ok := ctx.Value(holdingKey{c, dir}).(*holding)
	if !ok {
		return nil, false, nil
	}
	if k.Exclusive() && !h.exclusive {
		return nil, true, fmt.Errorf("dlock: lock %s: %w", dir, ErrDeadlock)
	}
	h.judge()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.lostErr != nil:
		return nil, true, fmt.Errorf("dlock: re-enter %s: %w", dir, h.lostErr)
	case h.unlocking:
		return nil, false, nil // released meanwhile: queue as anyone else
	}
	h.holds++
	c.stats.acquisitions.Add(1)
	return h.handle(), true, nil
}

// Token is the fencing token: the lock path's creation zxid plus the node's sequence number (see
// fencingToken). Every later dlock holder of the same lock has a larger one, across leader
// changes and a re-created path, so storage that remembers the largest token it has seen can
// refuse a write from a holder that lost the lock without knowing it yet.
//
// Earlier dlock versions used the node's own creation zxid, which is larger than this rule's
// tokens for the same path. A store that has seen such tokens refuses this version's until the
// lock path is created anew (ZooKeeper removes an idle container path within its check interval,
// 60 s by default): when a fleet moves from one rule to the other, let each path go idle once, or
// reset the store's fence.
func (l *Lease) Token() int64 { return l.h.token }

// Node is the full path of this holding's node.
func (l *Lease) Node() string { return l.h.node }

// Context is cancelled when the lease is lost (its cause then wraps ErrLost) or unlocked. Pass it
// to the work done under the lock, so that the work stops when the lock can no longer be trusted.
// It also carries the holding: Lock on the same path with this context (or one derived from it)
// re-enters instead of queueing behind itself.
func (l *Lease) Context() context.Context { return l.ctx }

// Lost is closed when the holding can no longer be trusted, and always before ZooKeeper can give
// the lock to anyone else: when the session expires or the client closes, when the node is deleted
// by someone else, and when nothing has proved the session alive for nine tenths of the session
// timeout the server granted (counted from the latest request that a sync or a write, which only
// the leader answers, proves the leader has heard of: see heard.go), which covers a connection
// reset, a silent partition and a follower cut off from its leader alike. Stop the critical section then. Unlock
// does not close it.
//
// It is judged when called, not only when a timer goroutine gets to run: a process that wakes from
// a pause past the deadline finds it closed at its first look.
func (l *Lease) Lost() <-chan struct{} {
	l.h.judge()
	return l.h.lost
}

// judge marks the holding lost now if its session's deadline has passed, instead of whenever the
// monitor goroutine gets to run.
func (h *holding) judge() {
	if !h.c.trusted(h.gen) {
		h.markLost(h.gen.err)
	}
}

// Err says why the lease was lost (it wraps ErrLost), or nil while it is not.
func (l *Lease) Err() error {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	return l.h.lostErr
}

// ErrReleasePending is what Unlock answers when it could not delete the lock node at once because
// ZooKeeper was out of reach (the connection down or silent, or back but not yet trusted: the
// moments after a reconnection), or ctx ended first. The release is not failed and needs nothing
// from the caller: the lease is given up (its context is cancelled), the delete goes on in the
// background once a session is there, and at the latest the node goes with the session. Only the
// next holder may have to wait for it. Treat it as success; log it at debug level if at all.
var ErrReleasePending = errors.New("dlock: release pending: the lock node is deleted in the background, or goes with the session")

// Unlock releases the lease. The last Lease on a holding deletes the lock's node; when Unlock
// returns nil the node is gone and the next waiter can go ahead. It never waits for a ZooKeeper
// that cannot be reached: while ZooKeeper is unreachable Unlock returns promptly, with an error
// wrapping ErrReleasePending, and the delete finishes in the background (the node goes with the
// session at the latest). That error is not a failure: check it with errors.Is and carry on. It
// is idempotent: later calls return the first call's result. A lease that was lost, whether or
// not Lost has closed yet, answers an error wrapping ErrLost; any other error is one ZooKeeper
// gave (the node may stay until the session ends).
func (l *Lease) Unlock(ctx context.Context) error {
	first := false
	l.once.Do(func() {
		first = true
		l.unlockErr = l.h.release(ctx)
		l.cancel(errUnlocked)
		close(l.unlocked)
	})
	if first {
		return l.unlockErr
	}
	select {
	case <-l.unlocked:
		return l.unlockErr
	case <-ctx.Done():
		return fmt.Errorf("dlock: unlock %s: %w", l.h.node, ctx.Err())
	}
}

// release gives up one hold; the last one deletes the node.
func (h *holding) release(ctx context.Context) error {
	h.mu.Lock()
	h.holds--
	if h.holds > 0 {
		lostErr := h.lostErr
		h.mu.Unlock()
		if lostErr != nil {
			return fmt.Errorf("dlock: unlock %s: %w", h.node, lostErr)
		}
		return nil
	}
	h.unlocking = true
	close(h.released)
	lostErr := h.lostErr
	h.mu.Unlock()
	defer h.cancel(errUnlocked)

	if lostErr == nil && !h.c.trusted(h.gen) {
		lostErr = h.gen.err
	}
	if lostErr != nil {
		// The session may still hold the node after a long silence; nobody trusts it any more.
		h.c.removeLater(h.node, h.owner)
		return fmt.Errorf("dlock: unlock %s: %w", h.node, lostErr)
	}
	dctx, cancel := context.WithTimeout(withNoWait(ctx), cleanupTimeout)
	goneBefore, err := h.c.removeNow(dctx, h.node, h.owner)
	cancel()
	switch {
	case err != nil:
		h.c.removeLater(h.node, h.owner)
		if deferred(err) {
			return fmt.Errorf("dlock: unlock %s: %w: %w", h.node, ErrReleasePending, err)
		}
		return fmt.Errorf("dlock: unlock %s: %w", h.node, err)
	case goneBefore:
		return fmt.Errorf("dlock: unlock %s: %w: the node was deleted by someone else", h.node, ErrLost)
	}
	return nil
}

// deferred reports whether a delete failed only for want of a reachable ZooKeeper or of time, as
// opposed to an answer from ZooKeeper refusing it.
func deferred(err error) bool {
	return errors.Is(err, ErrNoSession) || errors.Is(err, ErrClosed) || isConnectionError(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// ownWatchDelay is how long a holding lasts before the holder watches its own node, to learn if
// anyone else deletes it. Most holdings end sooner, and the watch would cost each of them a
// request; a deletion in the first moments is learnt when the watch is set.
const ownWatchDelay = 50 * time.Millisecond

// monitor closes Lost when the session's trust ends, or when the node is deleted by someone else.
// Requests to ZooKeeper run beside it, so that it always hears the session's end at once.
func (h *holding) monitor() {
	delay := time.NewTimer(ownWatchDelay)
	defer delay.Stop()
	type result struct {
		w   watched
		err error
	}
	var watching chan result // the pending watchNode on the node, if any
	var watch <-chan zk.Event
	setWatch := func() {
		watching = make(chan result, 1)
		go func(out chan<- result) {
			w, err := h.c.watchNode(h.ctx, h.node) // h.ctx ends with the holding
			out <- result{w, err}
		}(watching)
	}
	for {
		select {
		case <-h.released:
			return
		case <-h.gen.done:
			h.markLost(h.gen.err)
			return
		case <-delay.C:
			setWatch()
		case r := <-watching:
			watching = nil
			switch {
			case errors.Is(r.err, zk.ErrNoNode):
				h.markLost(fmt.Errorf("%w: lock node %s was deleted by someone else", ErrLost, h.node))
				return
			case r.err != nil: // the holding ended meanwhile; the cases above say how
				continue
			}
			watch = r.w.ch
		case ev := <-watch:
			watch = nil
			select {
			case <-h.released:
				return
			default:
			}
			switch {
			case ev.Type == zk.EventNodeDataChanged:
				setWatch()
				continue
			case ev.Type == zk.EventNodeDeleted:
				h.markLost(fmt.Errorf("%w: lock node %s was deleted by someone else", ErrLost, h.node))
			case errors.Is(ev.Err, zk.ErrClosing):
				h.markLost(fmt.Errorf("%w: %w", ErrLost, ErrClosed))
			default:
				h.markLost(fmt.Errorf("%w: ZooKeeper session ended (%v)", ErrLost, ev.Err))
			}
			return
		}
	}
}

func (h *holding) markLost(err error) {
	h.mu.Lock()
	if h.lostErr != nil || h.unlocking {
		h.mu.Unlock()
		return
	}
	h.lostErr = err
	h.mu.Unlock()
	// The context first: whoever wakes on Lost finds the context ended and its cause set.
	h.cancel(err)
	close(h.lost)
	h.c.log.Warn("lock lost", "node", h.node, "token", h.token, "err", err)
	// After a long disconnection the session may come back with the node still in place; it must
	// not block the queue once nobody trusts it.
	h.c.removeLater(h.node, h.owner)
}
