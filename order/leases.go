package order

import (
	"context"
	"errors"

	"github.com/zkstock/zkstock/dlock"
)

// leaseState is what a critical section needs to know of its locks: whether they are lost, and a
// context that ends when they are.
type leaseState interface {
	Lost() <-chan struct{}
	Context() context.Context
}

// heldLocks is a cart's holding: every SKU's lock, however the mode takes them.
type heldLocks interface {
	leaseState
	Tokens() map[string]int64 // fencing token per SKU
	Unlock(context.Context) error
}

// zkLeases is dlock's LockAll holding of the SKUs' locks.
type zkLeases struct {
	*dlock.Leases
	skus []string
}

func (z zkLeases) Tokens() map[string]int64 {
	tokens := map[string]int64{}
	for _, sku := range z.skus {
		tokens[sku] = z.Token(lockPath(sku))
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
