package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"
)

// Lease is one holding of a lock.
type Lease struct {
	c        *Client
	node     string
	owner    int64
	token    int64
	gen      *generation
	lost     chan struct{}
	released chan struct{} // closed when Unlock starts, so our own delete is not taken as a loss

	mu         sync.Mutex
	lostErr    error
	unlocking  bool
	unlockDone chan struct{}
	unlockErr  error
}

func newLease(c *Client, n *ownNode, gen *generation) *Lease {
	l := &Lease{
		c: c, node: n.path, owner: n.owner, token: n.token, gen: gen,
		lost: make(chan struct{}), released: make(chan struct{}), unlockDone: make(chan struct{}),
	}
	go l.monitor(n.watch)
	return l
}

// Token is the fencing token: the czxid of the lease's node. Every later holder of the same lock
// has a larger one, so storage that remembers the largest token it has seen can refuse a write
// from a holder that lost the lock without knowing it yet.
func (l *Lease) Token() int64 { return l.token }

// Node is the full path of this holding's node.
func (l *Lease) Node() string { return l.node }

// Lost is closed when the holding can no longer be trusted, and always before ZooKeeper can give
// the lock to anyone else: when the session expires or the client closes, when the node is deleted
// by someone else, and when nothing has proved the session alive for nine tenths of the session
// timeout the server granted (counted from the send time of the last request it answered), which
// covers a connection reset and a silent partition alike. Stop the critical section then. Unlock
// does not close it.
//
// It is judged when called, not only when a timer goroutine gets to run: a process that wakes from
// a pause past the deadline finds it closed at its first look.
func (l *Lease) Lost() <-chan struct{} {
	if !l.c.trusted(l.gen) {
		l.markLost(l.gen.err)
	}
	return l.lost
}

// Err says why the lease was lost (it wraps ErrLost), or nil while it is not.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

// Unlock deletes the lease's node; when it returns nil the next waiter can go ahead. It never
// waits for a ZooKeeper that cannot be reached: the delete then goes on in the background (the
// node goes with the session at the latest) and Unlock returns an error saying so. It is
// idempotent: later calls return the first call's result. A lease that was lost, whether or not
// Lost has closed yet, answers an error wrapping ErrLost.
func (l *Lease) Unlock(ctx context.Context) error {
	l.mu.Lock()
	if l.unlocking {
		l.mu.Unlock()
		select {
		case <-l.unlockDone:
			return l.unlockErr
		case <-ctx.Done():
			return fmt.Errorf("dlock: unlock %s: %w", l.node, ctx.Err())
		}
	}
	l.unlocking = true
	close(l.released)
	lostErr := l.lostErr
	l.mu.Unlock()

	if lostErr == nil && !l.c.trusted(l.gen) {
		lostErr = l.gen.err
	}
	var err error
	if lostErr != nil {
		// The session may still hold the node after a long silence; nobody trusts it any more.
		l.c.removeLater(l.node, l.owner)
		err = fmt.Errorf("dlock: unlock %s: %w", l.node, lostErr)
	} else {
		dctx, cancel := context.WithTimeout(withNoWait(ctx), cleanupTimeout)
		goneBefore, derr := l.c.removeNow(dctx, l.node, l.owner)
		cancel()
		switch {
		case derr != nil:
			l.c.removeLater(l.node, l.owner)
			err = fmt.Errorf("dlock: unlock %s: deleting in the background: %w", l.node, derr)
		case goneBefore:
			err = fmt.Errorf("dlock: unlock %s: %w: the node was deleted by someone else", l.node, ErrLost)
		}
	}
	l.mu.Lock()
	l.unlockErr = err
	l.mu.Unlock()
	close(l.unlockDone)
	return err
}

// monitor closes Lost when the node or its session goes.
func (l *Lease) monitor(watch <-chan zk.Event) {
	for {
		select {
		case <-l.released:
			return
		case <-l.gen.done:
			l.markLost(l.gen.err)
			return
		case ev := <-watch:
			select {
			case <-l.released:
				return
			default:
			}
			switch {
			case ev.Type == zk.EventNodeDataChanged:
				w, err := l.c.existsW(l.c.bgCtx, l.node)
				if err == nil {
					watch = w.ch
					continue
				}
				l.markLost(fmt.Errorf("%w: watching lock node %s: %w", ErrLost, l.node, err))
			case ev.Type == zk.EventNodeDeleted:
				l.markLost(fmt.Errorf("%w: lock node %s was deleted by someone else", ErrLost, l.node))
			case errors.Is(ev.Err, zk.ErrClosing):
				l.markLost(fmt.Errorf("%w: %w", ErrLost, ErrClosed))
			default:
				l.markLost(fmt.Errorf("%w: ZooKeeper session ended (%v)", ErrLost, ev.Err))
			}
			return
		}
	}
}

func (l *Lease) markLost(err error) {
	l.mu.Lock()
	if l.lostErr != nil || l.unlocking {
		l.mu.Unlock()
		return
	}
	l.lostErr = err
	close(l.lost)
	l.mu.Unlock()
	l.c.log.Warn("lock lost", "node", l.node, "token", l.token, "err", err)
	// After a long disconnection the session may come back with the node still in place; it must
	// not block the queue once nobody trusts it.
	l.c.removeLater(l.node, l.owner)
}
