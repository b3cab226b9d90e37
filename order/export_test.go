package order

import "time"

// Hooks for the tests in package order_test.

// SetBatchPanic makes every zk-batch sale call f first (a panic in f is a panic in the batch).
func (s *Server) SetBatchPanic(f func()) { s.sales.SetBatchPanic(f) }

// Batchers is how many SKUs have a batcher now.
func (s *Server) Batchers() int { return s.sales.Batchers() }

// LiveHeapBytes collects the garbage and says how many bytes the collection marked live.
var LiveHeapBytes = liveHeap

// SetWorkDelay sets WORK_DELAY; call it before the requests it is for.
func (s *Server) SetWorkDelay(d time.Duration) {
	s.cfg.WorkDelay = d
	s.sales.SetWorkDelay(d)
}

// TrustSoldOutSuspicion makes purchases of a SKU suspected of being sold out answer out_of_stock
// without reading the stock (a cached flag): a mistake, for the check's negative control.
func (s *Server) TrustSoldOutSuspicion() { s.sales.TrustSoldOutSuspicion() }
