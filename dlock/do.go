package dlock

import (
	"context"

	"github.com/go-zookeeper/zk"
)

// Do runs one request on the client's ZooKeeper connection once the client has a session, and
// stops waiting for it when ctx ends or the client closes (the request may still be applied
// then). It is for recipes whose nodes must live and die with the same session as the client's
// locks: a fleet's members and configuration beside its barrier (package fleet). Do does not
// retry: whether a request that met a connection error was applied is the caller's to learn.
func Do[T any](ctx context.Context, c *Client, op func(conn *zk.Conn) (T, error)) (T, error) {
	if _, err := c.session(ctx); err != nil {
		var zero T
		return zero, err
	}
	return call(ctx, c, func() (T, error) { return op(c.conn) })
}
