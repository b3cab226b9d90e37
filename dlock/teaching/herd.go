package teaching

import (
	"context"
	"fmt"
	"path"
	"slices"

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
		st   *zk.Stat
		ch   <-chan zk.Event
	}
	for {
		cw, err := call(ctx, h.c, func() (childrenWatch, error) {
			h.c.stats.children.Add(1)
			kids, st, ch, err := h.c.conn.ChildrenW(h.path)
			return childrenWatch{kids, st, ch}, err
		})
		if err != nil {
			return nil, err
		}
		queue := nodename.Queue(cw.kids)
		if !slices.ContainsFunc(queue, func(n nodename.Node) bool { return n.Name == own.Name }) {
			// Gone with the session; and a read without it may be of a later incarnation of
			// the path, whose czxid is not the token's.
			return nil, fmt.Errorf("node %s vanished while waiting", p)
		}
		if len(nodename.Blockers(queue, own)) == 0 {
			// The read that lists the node carries its path's stat: the token, dlock's, at no
			// extra request.
			token := nodename.Token(cw.st.Czxid, own.Seq)
			return h.c.grant(ctx, p, func() (int64, error) { return token, nil })
		}
		select {
		case <-cw.ch:
			h.c.stats.watchEvents.Add(1)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
