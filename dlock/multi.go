package dlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Leases is a holding of several locks at once, taken by LockAll.
type Leases struct {
	leases []*Lease // in lock order: sorted by path
	lost   chan struct{}
	done   chan struct{} // closed by Unlock: stops the watchers of the leases' Lost
	ctx    context.Context
	cancel context.CancelCauseFunc

	once      sync.Once
	lostOnce  sync.Once
	unlockErr error
}

// LockAll takes every lock in one canonical order, sorted by path, whatever order they are given
// in: two callers that want overlapping sets can never each hold what the other waits for, so
// they cannot deadlock. It is all or nothing: on any failure, or when ctx ends, it releases what it
// took and no node of it is left behind. The locks may belong to different Clients; a path may
// appear only once.
func LockAll(ctx context.Context, mutexes ...*Mutex) (*Leases, error) {
	if len(mutexes) == 0 {
		return nil, errors.New("dlock: lock all: no locks given")
	}
	sorted := slices.SortedFunc(slices.Values(mutexes), func(a, b *Mutex) int { return cmp.Compare(a.path, b.path) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].path == sorted[i-1].path {
			return nil, fmt.Errorf("dlock: lock all: %s given twice", sorted[i].path)
		}
	}
	s := &Leases{lost: make(chan struct{}), done: make(chan struct{})}
	for _, m := range sorted {
		l, err := m.Lock(ctx)
		if err != nil {
			s.release(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("dlock: lock all: %w", err)
		}
		s.leases = append(s.leases, l)
	}
	s.ctx, s.cancel = context.WithCancelCause(leasesContext{Context: context.Background(), leases: s.leases})
	for _, l := range s.leases {
		go s.watch(l)
	}
	return s, nil
}

func (s *Leases) watch(l *Lease) {
	select {
	case <-l.h.lost:
		s.markLost(l)
	case <-s.done:
	}
}

// markLost ends the set's context, then closes its Lost, as for a Lease.
func (s *Leases) markLost(l *Lease) {
	s.lostOnce.Do(func() {
		s.cancel(fmt.Errorf("%s: %w", l.Node(), l.Err()))
		close(s.lost)
	})
}

// Leases are the holdings, sorted by path.
func (s *Leases) Leases() []*Lease { return slices.Clone(s.leases) }

// Token is the fencing token of the lock at path (0 if it is not one of them).
func (s *Leases) Token(path string) int64 {
	for _, l := range s.leases {
		if l.h.dir == path {
			return l.Token()
		}
	}
	return 0
}

// Lost is closed when any of the leases is lost.
func (s *Leases) Lost() <-chan struct{} {
	for _, l := range s.leases {
		select {
		case <-l.Lost(): // judged now, as Lease.Lost is
			s.markLost(l)
		default:
		}
	}
	return s.lost
}

// Context is cancelled when any of the leases is lost, or on Unlock. It carries every holding:
// Lock on any of the paths with it re-enters.
func (s *Leases) Context() context.Context { return s.ctx }

// Unlock releases every lease, in the reverse of the order they were taken. It is idempotent; its
// error joins the leases' errors.
func (s *Leases) Unlock(ctx context.Context) error {
	s.once.Do(func() {
		s.unlockErr = s.release(ctx)
		close(s.done)
		s.cancel(errUnlocked)
	})
	return s.unlockErr
}

func (s *Leases) release(ctx context.Context) error {
	var errs []error
	for i := len(s.leases) - 1; i >= 0; i-- {
		errs = append(errs, s.leases[i].Unlock(ctx))
	}
	return errors.Join(errs...)
}

// leasesContext carries every holding of a Leases, so that each path re-enters.
type leasesContext struct {
	context.Context
	leases []*Lease
}

func (c leasesContext) Value(key any) any {
	if k, ok := key.(holdingKey); ok {
		for _, l := range c.leases {
			if v := l.ctx.Value(k); v != nil {
				return v
			}
		}
	}
	return c.Context.Value(key)
}
