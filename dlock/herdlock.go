package dlock

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
)

// HerdLock is a teaching variant: sequential nodes like Mutex, so it is fair, but every waiter
// watches the whole children list and reads it again on every change. Each release, and each new
// arrival, wakes every waiter: the herd effect that Mutex's predecessor watch avoids.
type HerdLock struct {
	c    *Client
	path string
}

// NewHerdLock returns the lock at path. Its nodes queue with Mutex nodes on the same path.
func NewHerdLock(c *Client, path string) *HerdLock { return &HerdLock{c: c, path: path} }

// Lock waits until its node is the lowest, or ctx ends.
func (h *HerdLock) Lock(ctx context.Context) (*Lease, error) {
	if err := validateLockPath(h.path); err != nil {
		return nil, err
	}
	for {
		n, err := h.c.createNode(ctx, h.path, kindLock)
		if err != nil {
			return nil, fmt.Errorf("dlock: herd lock %s: %w", h.path, err)
		}
		if err := h.c.watchOwn(ctx, n); err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			h.c.discard(ctx, n.path, n.owner)
			return nil, fmt.Errorf("dlock: herd lock %s: %w", h.path, err)
		}
		l, err := h.wait(ctx, n)
		if errors.Is(err, errRequeue) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("dlock: herd lock %s: %w", h.path, err)
		}
		h.c.stats.acquisitions.Add(1)
		return l, nil
	}
}

func (h *HerdLock) wait(ctx context.Context, n *ownNode) (*Lease, error) {
	for {
		cw, err := retry(ctx, h.c, func() (childrenWatch, error) {
			h.c.stats.children.Add(1)
			kids, _, ch, err := h.c.conn.ChildrenW(n.dir)
			return childrenWatch{kids, ch}, err
		})
		if err != nil {
			h.c.discard(ctx, n.path, n.owner)
			return nil, err
		}
		queue := parseQueue(cw.kids)
		if !slices.ContainsFunc(queue, func(x lockNode) bool { return x.name == n.node.name }) {
			return nil, errRequeue
		}
		if len(blockers(queue, n.node)) == 0 {
			l, err := h.c.grant(n)
			if errors.Is(err, errNoSession) {
				continue
			}
			return l, err
		}
		select {
		case <-cw.ch:
			h.c.stats.watchEvents.Add(1)
		case <-ctx.Done():
			h.c.discard(ctx, n.path, n.owner)
			return nil, ctx.Err()
		case <-h.c.closedCh:
			return nil, ErrClosed
		}
	}
}

type childrenWatch struct {
	kids []string
	ch   <-chan zk.Event
}
