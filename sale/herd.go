package sale

import (
	"context"
	"fmt"

	"github.com/zkstock/zkstock/dlock/teaching"
)

// herdClient is mode zk-herd's ZooKeeper session. The herd recipe is a teaching one, kept out of
// dlock with a session of its own, opened the first time a replica sells in that mode. One caller
// opens it; the others wait for that, each only until its own ctx ends, so that a queue behind an
// opening that hangs (ZooKeeper unreachable) is answered by each purchase's own deadline.
func (e *Engine) herdClient(ctx context.Context) (*teaching.Client, error) {
	h := &e.herd
	for {
		h.mu.Lock()
		if h.c != nil {
			c := h.c
			h.mu.Unlock()
			return c, nil
		}
		opening := h.opening
		if opening == nil {
			if err := ctx.Err(); err != nil { // woken by a failed opening as its own wait ended
				h.mu.Unlock()
				return nil, fmt.Errorf("zk-herd session: %w", err)
			}
			done := make(chan struct{})
			h.opening = done
			h.mu.Unlock()
			return e.openHerd(ctx, done)
		}
		h.mu.Unlock()
		select {
		case <-opening: // opened, or failed for its opener's reasons: look again
		case <-ctx.Done():
			return nil, fmt.Errorf("zk-herd session: %w", ctx.Err())
		}
	}
}

// openHerd opens the herd session for herdClient, and closes done when it is over. A session
// opened after Close is closed at once and refused (errShuttingDown).
func (e *Engine) openHerd(ctx context.Context, done chan struct{}) (*teaching.Client, error) {
	c, err := teaching.Connect(ctx, e.cfg.ZKServers, e.cfg.ZKSessionTimeout, e.cfg.ReplicaID, e.cfg.HerdOptions...)
	h := &e.herd
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opening = nil
	close(done)
	if err != nil {
		return nil, fmt.Errorf("zk-herd session: %w", err)
	}
	select {
	case <-e.stop: // Close has run, and would not see this session to close it
		_ = c.Close()
		return nil, fmt.Errorf("zk-herd session: %w", errShuttingDown)
	default:
	}
	h.c = c
	return c, nil
}
