package dlock

import (
	"context"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

// Mutex is a fair (FIFO), herd-free exclusive lock on one ZooKeeper path. It holds no state of its
// own: goroutines may share one Mutex, each Lock call queues separately, and it can be locked again
// after any failure.
type Mutex struct {
	c    *Client
	path string
}

// NewMutex returns the lock at path (for example /zkstock/locks/sku/SKU-1). Parents are created
// on demand as container nodes.
func NewMutex(c *Client, path string) *Mutex { return &Mutex{c: c, path: path} }

// Path is the lock's ZooKeeper path.
func (m *Mutex) Path() string { return m.path }

// Lock waits until the lock is held, or ctx ends (the error then wraps ctx.Err() and the waiter's
// node has been deleted).
//
// Lock is reentrant through the context, not through the Client: a ctx that carries a lease of
// this path (Lease.Context, or a context derived from it) re-enters that holding and gets a Lease
// of its own at once; the node is deleted when the last of them is unlocked. Any other call
// queues, even from the same Client, so that goroutines sharing a Client still exclude each
// other. A Go program has no thread identity to key reentrancy on (Curator's InterProcessMutex
// keys it on the Java thread); the context is what the work under a lock is handed.
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) {
	return m.c.acquire(ctx, m.path, nodename.Lock, false)
}

// TryLock takes the lock only if nobody holds it or waits for it; otherwise it returns ErrLocked
// at once, having left no node behind.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	return m.c.acquire(ctx, m.path, nodename.Lock, true)
}
