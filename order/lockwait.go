package order

import (
	"context"
	"time"
)

// One change waits for locks LOCK_TIMEOUT at most in all. Its wait for the fleet to admit it (a
// switch under way), for its locks, and for them again when it queues a second time (a purchase
// sent away by the sold-out poller whose key could not be looked up; the retry after a stale
// token) all end at one deadline, set when the change arrives (admit) and carried in its context.

type lockDeadlineKey struct{}

// withLockDeadline carries the change's lock deadline in ctx.
func withLockDeadline(ctx context.Context, deadline time.Time) context.Context {
	return context.WithValue(ctx, lockDeadlineKey{}, deadline)
}

// lockWait is ctx ended at the change's lock deadline too: every lock wait of the change waits
// within it. A context without a deadline of a change (the batcher's own lease) has LOCK_TIMEOUT
// from now.
func (s *Server) lockWait(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Value(lockDeadlineKey{}).(time.Time)
	if !ok {
		deadline = time.Now().Add(s.cfg.LockTimeout)
	}
	return context.WithDeadline(ctx, deadline)
}
