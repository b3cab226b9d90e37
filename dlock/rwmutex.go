package dlock

import (
	"context"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

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

// Path is the lock's ZooKeeper path.
func (rw *RWMutex) Path() string { return rw.path }

// RLock waits for a shared holding. With a context carrying a lease of this path (see
// Lease.Context), it re-enters that holding instead.
func (rw *RWMutex) RLock(ctx context.Context) (*Lease, error) {
	return rw.c.acquire(ctx, rw.path, nodename.Read, false)
}

// Lock waits for an exclusive holding. With a context carrying an exclusive lease of this path it
// re-enters that holding; with one carrying a read lease it answers ErrDeadlock at once.
func (rw *RWMutex) Lock(ctx context.Context) (*Lease, error) {
	return rw.c.acquire(ctx, rw.path, nodename.Write, false)
}

// TryRLock takes a shared holding only if no writer holds or waits; otherwise it answers
// ErrLocked at once, having left no node behind.
func (rw *RWMutex) TryRLock(ctx context.Context) (*Lease, error) {
	return rw.c.acquire(ctx, rw.path, nodename.Read, true)
}

// TryLock takes an exclusive holding only if nobody holds or waits; otherwise it answers
// ErrLocked at once, having left no node behind.
func (rw *RWMutex) TryLock(ctx context.Context) (*Lease, error) {
	return rw.c.acquire(ctx, rw.path, nodename.Write, true)
}
