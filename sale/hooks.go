package sale

import "time"

// Hooks for tests that drive the engine through its shell (package order's tests); nothing else
// calls them.

// SetBatchPanic makes every zk-batch sale call f first (a panic in f is a panic in the batch).
func (e *Engine) SetBatchPanic(f func()) { e.batches.panicHook = f }

// Batchers is how many SKUs have a batcher now.
func (e *Engine) Batchers() int {
	e.batches.mu.Lock()
	defer e.batches.mu.Unlock()
	return len(e.batches.m)
}

// SetWorkDelay sets the simulated work (Config.WorkDelay); call it before the changes it is for.
func (e *Engine) SetWorkDelay(d time.Duration) { e.cfg.WorkDelay = d }

// TrustSoldOutSuspicion makes purchases of a SKU suspected of being sold out answer out_of_stock
// without reading the stock (a cached flag): a mistake, for the checker's negative control.
func (e *Engine) TrustSoldOutSuspicion() {
	e.soldOut.mu.Lock()
	e.soldOut.trustSuspicion = true
	e.soldOut.mu.Unlock()
}
