package dlock

import (
	"context"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock/internal/async"
	"github.com/zkstock/zkstock/dlock/internal/protected"
)

// call runs one ZooKeeper request and stops waiting for it when ctx ends or the client closes.
// The abandoned request completes in the background and its result is dropped, which is harmless
// for reads and deletes; creates use createAbandonable instead.
func call[T any](ctx context.Context, c *Client, op func() (T, error)) (T, error) {
	return async.Call(ctx, c.closedCh, ErrClosed, op)
}

// retry runs a request that is safe to repeat, again after every connection error, once the
// client has a session again. Callers that care which session answered compare it themselves.
func retry[T any](ctx context.Context, c *Client, op func() (T, error)) (T, error) {
	for {
		if _, err := c.session(ctx); err != nil {
			var zero T
			return zero, err
		}
		v, err := call(ctx, c, op)
		if err == nil || !isConnectionError(err) {
			return v, err
		}
	}
}

// isConnectionError reports errors after which a request may or may not have been applied.
var isConnectionError = protected.ConnectionError

// children lists dir's children, with dir's stat (its Pzxid is the fencing token's source).
func (c *Client) children(ctx context.Context, dir string) ([]string, *zk.Stat, error) {
	type result struct {
		kids []string
		st   *zk.Stat
	}
	r, err := retry(ctx, c, func() (result, error) {
		c.stats.children.Add(1)
		kids, st, err := c.conn.Children(dir)
		return result{kids, st}, err
	})
	return r.kids, r.st, err
}

func (c *Client) exists(ctx context.Context, path string) (*zk.Stat, error) {
	return retry(ctx, c, func() (*zk.Stat, error) {
		c.stats.exists.Add(1)
		ok, st, err := c.conn.Exists(path)
		if err == nil && !ok {
			return nil, zk.ErrNoNode
		}
		return st, err
	})
}

type watched struct {
	stat *zk.Stat
	ch   <-chan zk.Event
}

// watchNode watches a node that should exist (its deletion fires the watch); ErrNoNode if it does
// not. It sets a data watch (GetW), not ExistsW's: on a missing node ExistsW leaves a creation
// watch behind, which for a sequential name never fires and stays with the session for good. A
// holding released while its own-node watch was being set did just that, a few times in every
// thousand purchases (TestFootprintIsFlat in package order counts the watches left).
func (c *Client) watchNode(ctx context.Context, path string) (watched, error) {
	return retry(ctx, c, func() (watched, error) {
		c.stats.gets.Add(1)
		_, st, ch, err := c.conn.GetW(path)
		return watched{st, ch}, err
	})
}

// getW watches a node if it exists. GetW, unlike ExistsW, sets no watch on a missing node, which
// is why waiters use it on their predecessors.
func (c *Client) getW(ctx context.Context, path string) (<-chan zk.Event, error) {
	return retry(ctx, c, func() (<-chan zk.Event, error) {
		c.stats.gets.Add(1)
		_, _, ch, err := c.conn.GetW(path)
		return ch, err
	})
}
