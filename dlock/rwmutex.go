package dlock

import "context"

// RWMutex is a fair read/write lock: many readers or one writer, served in arrival order. A
// reader waits only for the last writer queued before it; a writer waits for the node just
// before it. When a writer releases, the readers right behind it wake, and no one else.
type RWMutex struct {
	c    *Client
	path string
}

// NewRWMutex returns the read/write lock at path. Its writers also exclude Mutex holders on the
// same path.
func NewRWMutex(c *Client, path string) *RWMutex { return &RWMutex{c: c, path: path} }

// RLock waits for a shared holding.
func (rw *RWMutex) RLock(ctx context.Context) (*Lease, error) {
	return rw.c.acquire(ctx, rw.path, kindRead, false)
}

// Lock waits for an exclusive holding.
func (rw *RWMutex) Lock(ctx context.Context) (*Lease, error) {
	return rw.c.acquire(ctx, rw.path, kindWrite, false)
}
