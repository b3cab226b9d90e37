package dlock

import (
	"context"
	"fmt"
	"time"
)

// SpinLock is a teaching variant: every waiter tries to create one fixed ephemeral node, and on
// failure sleeps and tries again. No watches, no order: whoever happens to try right after a
// release wins, and every waiter keeps writing to ZooKeeper while it waits.
type SpinLock struct {
	c        *Client
	path     string
	interval time.Duration
}

// NewSpinLock retries every interval (10 ms if zero).
func NewSpinLock(c *Client, path string, interval time.Duration) *SpinLock {
	if interval <= 0 {
		interval = 10 * time.Millisecond
	}
	return &SpinLock{c: c, path: path, interval: interval}
}

// Lock spins until it creates the node or ctx ends.
func (s *SpinLock) Lock(ctx context.Context) (*Lease, error) {
	for {
		l, held, err := s.c.tryFixed(ctx, s.path)
		if err != nil {
			return nil, fmt.Errorf("dlock: spin lock %s: %w", s.path, err)
		}
		if held {
			return l, nil
		}
		t := time.NewTimer(s.interval)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("dlock: spin lock %s: %w", s.path, ctx.Err())
		case <-s.c.closedCh:
			t.Stop()
			return nil, ErrClosed
		}
	}
}
