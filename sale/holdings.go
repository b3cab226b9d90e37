package sale

import (
	"context"
	"errors"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/inventory"
)

// leaseState is what a critical section needs to know of its locks: whether they are lost, and a
// context that ends when they are.
type leaseState interface {
	Lost() <-chan struct{}
	Context() context.Context
}

// holding is what a change needs of the locks its mode took: every SKU's lock, however the mode
// takes them, and their tokens.
type holding interface {
	leaseState
	Tokens() map[string]int64 // fencing token per SKU
	Unlock(context.Context) error
}

// heldLock is one SKU's lock: a dlock Lease, a teaching recipe's, a Redis or a table lease.
type heldLock interface {
	leaseState
	Token() int64
	Unlock(context.Context) error
}

// oneLock is a holding of one SKU's lock.
type oneLock struct {
	sku string
	heldLock
}

func (o oneLock) Tokens() map[string]int64 { return map[string]int64{o.sku: o.Token()} }

// tableLease is a table lock as a lease: it issues no token and cannot tell when it is lost (its
// row expires silently), which is what the comparison shows.
type tableLease struct {
	held   *inventory.HeldTableLock
	ctx    context.Context
	cancel context.CancelFunc
}

func newTableLease(h *inventory.HeldTableLock) *tableLease {
	ctx, cancel := context.WithCancel(context.Background())
	return &tableLease{held: h, ctx: ctx, cancel: cancel}
}

func (t *tableLease) Token() int64             { return 0 }
func (t *tableLease) Lost() <-chan struct{}    { return nil } // never known
func (t *tableLease) Context() context.Context { return t.ctx }
func (t *tableLease) Unlock(ctx context.Context) error {
	defer t.cancel()
	return t.held.Release(ctx)
}

// zkLeases is dlock's LockAll holding of the SKUs' locks.
type zkLeases struct {
	*dlock.Leases
	skus []string
}

func (z zkLeases) Tokens() map[string]int64 {
	tokens := map[string]int64{}
	for _, sku := range z.skus {
		tokens[sku] = z.Token(LockPath(sku))
	}
	return tokens
}

// multiLease is several locks taken one after the other, in the order given (lockInOrder).
type multiLease struct {
	skus   []string
	locks  []heldLock
	ctx    context.Context
	cancel context.CancelFunc
	stops  []func() bool
}

// lockInOrder takes one lock per SKU in the order given (callers sort), all or nothing.
func lockInOrder(ctx context.Context, skus []string, lockOne func(context.Context, string) (heldLock, error)) (*multiLease, error) {
	m := &multiLease{}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	for _, sku := range skus {
		l, err := lockOne(ctx, sku)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			defer cancel()
			return nil, errors.Join(err, m.Unlock(rctx))
		}
		m.skus, m.locks = append(m.skus, sku), append(m.locks, l)
		m.stops = append(m.stops, context.AfterFunc(l.Context(), m.cancel))
	}
	return m, nil
}

func (m *multiLease) Tokens() map[string]int64 {
	tokens := map[string]int64{}
	for i, l := range m.locks {
		tokens[m.skus[i]] = l.Token()
	}
	return tokens
}

// Lost asks every lock now (each judges its own deadline when asked), then falls back on the
// context that ends when any of them is lost.
func (m *multiLease) Lost() <-chan struct{} {
	for _, l := range m.locks {
		select {
		case <-l.Lost():
			m.cancel()
		default:
		}
	}
	return m.ctx.Done()
}

func (m *multiLease) Context() context.Context { return m.ctx }

// Unlock releases every lock, the last taken first.
func (m *multiLease) Unlock(ctx context.Context) error {
	for _, stop := range m.stops {
		stop()
	}
	var errs []error
	for i := len(m.locks) - 1; i >= 0; i-- {
		errs = append(errs, m.locks[i].Unlock(ctx))
	}
	m.cancel()
	return errors.Join(errs...)
}
