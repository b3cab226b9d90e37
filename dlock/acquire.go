package dlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

// errRequeue: the waiter's node vanished with an old session; it queues again with a new node.
var errRequeue = errors.New("lock node vanished while waiting")

// acquire is the one recipe behind Mutex and RWMutex.
func (c *Client) acquire(ctx context.Context, dir string, k nodename.Kind, try bool) (*Lease, error) {
	if err := validateLockPath(dir); err != nil {
		return nil, err
	}
	if lease, reentered, err := c.reenter(ctx, dir, k); reentered {
		return lease, err
	}
	if try {
		ctx = withNoWait(ctx)
		// Answer "locked" without writing anything when the queue is visibly busy: no node is
		// created, so none can leak (kazoo #732).
		kids, _, err := c.children(ctx, dir)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("dlock: trylock %s: %w", dir, err)
		}
		if len(nodename.NewcomerBlockers(nodename.Queue(kids), k)) > 0 {
			return nil, ErrLocked
		}
	}
	for {
		n, err := c.createNode(ctx, dir, k)
		if err != nil {
			return nil, fmt.Errorf("dlock: lock %s: %w", dir, err)
		}
		lease, err := c.waitTurn(ctx, n, try)
		switch {
		case errors.Is(err, errRequeue):
			c.log.Info("lock node vanished while waiting; queueing again", "node", n.path)
			continue
		case errors.Is(err, ErrLocked):
			return nil, ErrLocked
		case err != nil:
			return nil, fmt.Errorf("dlock: lock %s: %w", dir, err)
		}
		c.stats.acquisitions.Add(1)
		return lease, nil
	}
}

// waitTurn waits until no node ahead of n blocks it, watching only the nearest blocker. Sequence
// numbers only grow, so the set of nodes ahead of n can shrink but never gain a member: when the
// watched node was the last blocker n knew of, n holds the lock without reading the queue again.
//
// Any read of the queue that shows n will do, however it was sent (readQueue): n is in it, so it
// was taken after n's create was applied, and so after every node ahead of n was created (their
// sequence numbers are lower: ZooKeeper gave them out earlier, in the order every server applies
// the changes in). A node ahead of n that the read does not show was deleted before it, for good.
//
// Of the blockers ahead it keeps only the nearest (aheadKept) and how many there were: a waiter
// that kept them all held its own copy of the queue, and a queue of q waiters in one process held
// q²/2 names (1.2 GB a replica in a flash sale of a few thousand waiters).
func (c *Client) waitTurn(ctx context.Context, n *ownNode, try bool) (*Lease, error) {
	var ahead blockers
	var removing map[string]bool
	readQueue := true
	for {
		if readQueue {
			kids, st, behind, err := c.readQueue(ctx, n)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				c.discard(ctx, n.path, n.owner)
				return nil, err
			}
			queue := nodename.Queue(kids)
			if !slices.ContainsFunc(queue, func(x nodename.Node) bool { return x.Name == n.node.Name }) {
				return nil, errRequeue
			}
			n.token = fencingToken(st, n.node)
			for _, s := range nodename.Strays(queue, n.node) {
				if !removing[s.Name] {
					if removing == nil {
						removing = map[string]bool{}
					}
					removing[s.Name] = true
					c.log.Warn("deleting a second node of this attempt (a create's reply was lost)", "node", s.Name)
					c.removeLater(n.dir+"/"+s.Name, n.owner)
				}
			}
			ahead = nearestBlockers(nodename.Blockers(queue, n.node))
			readQueue = false
			if behind && !try && ahead.count > 0 && ahead.count <= handOverReach {
				readQueue = true // look again: the read behind the create is a round trip early
				continue
			}
		}
		if try && ahead.count > 0 {
			c.discard(ctx, n.path, n.owner)
			return nil, ErrLocked
		}
		if ahead.count == 0 {
			lease, err := c.grant(n)
			if errors.Is(err, errNoSession) {
				readQueue = true // the session is unsure: look again once it is back
				continue
			}
			return lease, err
		}
		wake, err := c.getW(ctx, n.dir+"/"+ahead.nearest().Name)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			readQueue = ahead.pop()
			continue
		case err != nil:
			c.discard(ctx, n.path, n.owner)
			return nil, err
		}

		select {
		case ev := <-wake:
			c.stats.watchEvents.Add(1)
			if ev.Type == zk.EventNodeDeleted {
				readQueue = ahead.pop()
			} else {
				readQueue = true
			}
		case <-ctx.Done():
			c.discard(ctx, n.path, n.owner)
			return nil, ctx.Err()
		case <-c.closedCh:
			return nil, ErrClosed
		}
	}
}

// readQueue reads the queue n waits in. The first time, it takes the read sent behind n's create
// instead (behind reports that it did), if that one shows n; a read that does not show n (sent on
// another connection after a reconnection, to a server that had not applied the create yet; or
// failed) is dropped, and the queue read again as if it had never been sent.
func (c *Client) readQueue(ctx context.Context, n *ownNode) (kids []string, st *zk.Stat, behind bool, err error) {
	if ch := n.behind; ch != nil {
		n.behind = nil
		select {
		case r := <-ch:
			if r.err == nil && slices.Contains(r.kids, n.node.Name) {
				return r.kids, r.st, true, nil
			}
		case <-ctx.Done():
			return nil, nil, false, ctx.Err()
		case <-c.closedCh:
			return nil, nil, false, ErrClosed
		}
	}
	kids, st, err = c.children(ctx, n.dir)
	return kids, st, false, err
}

// handOverReach is how many nodes ahead a waiter expects to be gone a round trip after its create
// was applied. The read behind the create shows the queue at that instant, a round trip earlier
// than a read sent after the create's answer, as waiters always read it before; a standalone
// server answers a read only once the writes of any session queued before it are on disk, so the
// later read finds the holder's delete, and the next's, if they were on their way. With up to
// this many nodes ahead the waiter reads again rather than watch the nearest: measured with 3
// contenders (BenchmarkMutex), watching at once made 0.9 of acquisitions wait for a
// notification, reading again 0.17, with 0.1 fewer requests per acquisition and more
// acquisitions per second in 4 of 5 alternated runs. With more nodes ahead (30 contenders) one
// round trip does not empty the queue ahead, a second read would be one request more for
// nothing, and it watches the nearest at once.
const handOverReach = 2

// fencingToken is the lock path's creation zxid plus the node's sequence count, by the rule every
// recipe of this module shares (nodename.Token, where the proof that it grows from holder to
// holder, across a re-created path, leader changes and ZooKeeper's int32 wrap, lives). It costs no
// request: the children read that finds the node carries the path's stat.
func fencingToken(dir *zk.Stat, own nodename.Node) int64 { return nodename.Token(dir.Czxid, own.Seq) }

// blockers are the nodes ahead of a waiter that block it, as its last read of the queue showed:
// how many, and the nearest of them, nearest last.
type blockers struct {
	count int
	near  []nodename.Node
}

// aheadKept is how many of the nearest blockers a waiter keeps. pop reads the queue again
// whenever more than one is left, so a waiter never needs more than the nearest two.
const aheadKept = 2

func nearestBlockers(all []nodename.Node) blockers {
	// A copy: a slice of all would keep the whole queue's array alive.
	return blockers{count: len(all), near: slices.Clone(all[max(0, len(all)-aheadKept):])}
}

func (b *blockers) nearest() nodename.Node { return b.near[len(b.near)-1] }

// pop drops the nearest blocker, which is gone, and says whether the queue must be read again.
// With one blocker left, watching it costs the same one request as reading the queue and may
// save the next; with more, which of them are still there is best learnt in one read.
func (b *blockers) pop() (readQueue bool) {
	b.near = b.near[:len(b.near)-1]
	b.count--
	return b.count > 1
}

var errNoSession = errors.New("no trusted session")

// grant turns n into a lease, but only while the session that owns n is live and trusted: a node
// seen in an old read may already be gone with its session, and a lease must never stand on a
// node that does not exist.
func (c *Client) grant(n *ownNode) (*Lease, error) {
	c.checkDeadline()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.state == stateClosed:
		return nil, ErrClosed
	case c.gen == nil || c.gen.sessionID != n.owner:
		return nil, errRequeue
	case c.state != stateOpen || c.gen.ended():
		return nil, errNoSession
	}
	return newLease(c, n, c.gen), nil
}

func validateLockPath(p string) error {
	if !strings.HasPrefix(p, "/") || p == "/" || strings.HasSuffix(p, "/") {
		return fmt.Errorf("dlock: lock path %q must be absolute and not end in /", p)
	}
	for _, part := range strings.Split(p[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("dlock: lock path %q has an empty, . or .. element", p)
		}
	}
	return nil
}
