package teaching

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// The two recipes that fight over one fixed node: whoever creates <path>/lock holds the lock. They
// differ only in how losers wait.

const fixedNodeName = "lock"

// tryFixed creates the fixed ephemeral node once; held is false, with no error, when another
// session has it. A node of this session is taken as the attempt's own (its create's reply was
// lost), so one Client's attempts on one path must not overlap: an attempt given up on deletes the
// node its create made when the answer comes, whoever took it meanwhile. lockbench, the tests and
// the tutorials give every contender a Client of its own.
func (c *Client) tryFixed(ctx context.Context, dir string) (lease *Lease, held bool, err error) {
	p := dir + "/" + fixedNodeName
	sid := c.conn.SessionID()
	_, err = c.create(ctx, dir, fixedNodeName, zk.FlagEphemeral)
	switch {
	case err == nil:
	case errors.Is(err, zk.ErrNodeExists):
		// After a lost reply it may be our own node: check its owner.
		ok, st, serr := c.conn.Exists(p)
		c.stats.exists.Add(1)
		if serr != nil || !ok || st.EphemeralOwner != sid {
			return nil, false, nil
		}
	case ctx.Err() != nil:
		return nil, false, ctx.Err() // a create still on its way is undone when it answers (create)
	default:
		return nil, false, err
	}
	l, err := c.grantFixed(ctx, dir, p)
	if err != nil {
		_ = c.remove(ctx, p)
		return nil, false, err
	}
	return l, true, nil
}

// SpinLock: every waiter tries to create one fixed ephemeral node, and on failure sleeps and tries
// again. No watches, no order: whoever happens to try right after a release wins, and every waiter
// keeps writing to ZooKeeper while it waits.
type SpinLock struct {
	c        *Client
	path     string
	interval time.Duration
}

// NewSpinLock retries every interval (10 ms if zero).
func NewSpinLock(c *Client, path string, interval time.Duration) *SpinLock {
	if interval <= 0 {
		interval = 10 * time.Millisecond
	}
	return &SpinLock{c: c, path: path, interval: interval}
}

// Lock spins until it creates the node or ctx ends.
func (s *SpinLock) Lock(ctx context.Context) (*Lease, error) {
	for {
		l, held, err := s.c.tryFixed(ctx, s.path)
		if err != nil {
			return nil, fmt.Errorf("teaching: spin lock %s: %w", s.path, err)
		}
		if held {
			return l, nil
		}
		t := time.NewTimer(s.interval)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("teaching: spin lock %s: %w", s.path, ctx.Err())
		}
	}
}

// NodeWatchLock: one fixed ephemeral node, and every waiter watches it. Each release wakes all of
// them (the herd effect); they race to create the node, one wins, the rest watch again. Order is
// whatever the race gives.
type NodeWatchLock struct {
	c    *Client
	path string
}

// NewNodeWatchLock returns the lock at path.
func NewNodeWatchLock(c *Client, path string) *NodeWatchLock { return &NodeWatchLock{c: c, path: path} }

// Lock waits until it creates the node or ctx ends.
func (n *NodeWatchLock) Lock(ctx context.Context) (*Lease, error) {
	p := n.path + "/" + fixedNodeName
	for {
		l, held, err := n.c.tryFixed(ctx, n.path)
		if err != nil {
			return nil, fmt.Errorf("teaching: node-watch lock %s: %w", n.path, err)
		}
		if held {
			return l, nil
		}
		ch, err := call(ctx, n.c, func() (<-chan zk.Event, error) {
			n.c.stats.gets.Add(1)
			_, _, ch, err := n.c.conn.GetW(p)
			return ch, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // released in between: race for it
		}
		if err != nil {
			return nil, fmt.Errorf("teaching: node-watch lock %s: %w", n.path, err)
		}
		select {
		case <-ch:
			n.c.stats.watchEvents.Add(1)
		case <-ctx.Done():
			return nil, fmt.Errorf("teaching: node-watch lock %s: %w", n.path, ctx.Err())
		}
	}
}
