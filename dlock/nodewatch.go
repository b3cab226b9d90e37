package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// NodeWatchLock is a teaching variant: one fixed ephemeral node, and every waiter watches it. Each
// release wakes all of them (the herd effect); they race to create the node, one wins, the rest
// watch again. Order is whatever the race gives.
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
			return nil, fmt.Errorf("dlock: node-watch lock %s: %w", n.path, err)
		}
		if held {
			return l, nil
		}
		ch, err := n.c.getW(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			continue // released in between: race for it
		}
		if err != nil {
			return nil, fmt.Errorf("dlock: node-watch lock %s: %w", n.path, err)
		}
		select {
		case <-ch:
			n.c.stats.watchEvents.Add(1)
		case <-ctx.Done():
			return nil, fmt.Errorf("dlock: node-watch lock %s: %w", n.path, ctx.Err())
		case <-n.c.closedCh:
			return nil, ErrClosed
		}
	}
}
