package teaching

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"
)

// ErrLost is the cause of a teaching lease's context once it is lost.
var ErrLost = errors.New("teaching: lock lost")

// Lease is one holding of a teaching recipe's lock.
type Lease struct {
	c      *Client
	node   string
	token  int64
	lost   chan struct{}
	ctx    context.Context
	cancel context.CancelCauseFunc

	once      sync.Once
	lostOnce  sync.Once
	released  chan struct{}
	unlockErr error
}

func newLease(c *Client, node string, token int64, down <-chan struct{}, watch <-chan zk.Event) *Lease {
	l := &Lease{c: c, node: node, token: token, lost: make(chan struct{}), released: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	go func() {
		select {
		case <-down:
			l.markLost(fmt.Errorf("%w: disconnected from ZooKeeper", ErrLost))
		case ev := <-watch:
			select {
			case <-l.released:
			default:
				l.markLost(fmt.Errorf("%w: node %s: %v", ErrLost, node, ev.Type))
			}
		case <-l.released:
		}
	}()
	return l
}

func (l *Lease) markLost(err error) {
	l.lostOnce.Do(func() {
		l.cancel(err) // before Lost: whoever wakes on it finds the context ended
		close(l.lost)
	})
}

// Token is the fencing token, by dlock's rule (dlock.Lease.Token): the lock path's creation zxid
// plus the sequence number of the lease's node, read as dlock reads it across ZooKeeper's int32
// wrap; for the fixed-name recipes, whose node has none, the number of children created under
// the path as read while holding, less one (nodename.FixedCount). So on one lock path every next holder has a larger token, whichever
// recipe of this package or dlock.Mutex each holder used.
//
// Earlier versions used the node's own creation zxid, which is larger than this rule's tokens
// for the same path: a store that has seen those refuses these until the lock path is created
// anew (an idle container path is removed within ZooKeeper's check interval), or until its fence
// is reset.
func (l *Lease) Token() int64 { return l.token }

// Node is the lease's node.
func (l *Lease) Node() string { return l.node }

// Lost closes on any disconnection, or when the node is deleted by someone else: the crude rule.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Context is cancelled when the lease is lost or unlocked.
func (l *Lease) Context() context.Context { return l.ctx }

// Unlock deletes the node; it is idempotent.
func (l *Lease) Unlock(ctx context.Context) error {
	l.once.Do(func() {
		close(l.released)
		l.unlockErr = l.c.remove(ctx, l.node)
		l.cancel(errors.New("teaching: unlocked"))
	})
	return l.unlockErr
}
