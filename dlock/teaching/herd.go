package teaching

import (
	"context"
	"fmt"
	"path"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

// HerdLock: sequential nodes like dlock.Mutex, so it is fair, but every waiter watches the whole
// children list and reads it again on every change. Each release, and each new arrival, wakes
// every waiter: the herd effect that Mutex's predecessor watch avoids. Its nodes are named and
// read by the same rules as dlock's, so both queue together on one path.
type HerdLock struct {
	c    *Client
	path string
}

// NewHerdLock returns the lock at path.
func NewHerdLock(c *Client, path string) *HerdLock { return &HerdLock{c: c, path: path} }

// Lock waits until its node is the lowest, or ctx ends; on failure its node is deleted.
func (h *HerdLock) Lock(ctx context.Context) (*Lease, error) {
	base, err := nodename.Curator.Base(nodename.Lock)
	if err != nil {
		return nil, err
	}
	p, err := h.c.create(ctx, h.path, base, zk.FlagEphemeralSequential)
	if err != nil {
		return nil, fmt.Errorf("teaching: herd lock %s: %w", h.path, err)
	}
	own, ok := nodename.Parse(path.Base(p))
	if !ok {
		_ = h.c.remove(ctx, p)
		return nil, fmt.Errorf("teaching: herd lock %s: unexpected node name %s", h.path, p)
	}
	l, err := h.wait(ctx, p, own)
	if err != nil {
		_ = h.c.remove(ctx, p)
		return nil, fmt.Errorf("teaching: herd lock %s: %w", h.path, err)
	}
	return l, nil
}

func (h *HerdLock) wait(ctx context.Context, p string, own nodename.Node) (*Lease, error) {
	type childrenWatch struct {
		kids []string
		ch   <-chan zk.Event
	}
	for {
		cw, err := call(ctx, h.c, func() (childrenWatch, error) {
			h.c.stats.children.Add(1)
			kids, _, ch, err := h.c.conn.ChildrenW(h.path)
			return childrenWatch{kids, ch}, err
		})
		if err != nil {
			return nil, err
		}
		if len(nodename.Blockers(nodename.Queue(cw.kids), own)) == 0 {
			return h.c.grant(ctx, p)
		}
		select {
		case <-cw.ch:
			h.c.stats.watchEvents.Add(1)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
