package sale

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// batches are mode zk-batch's batchers, one per SKU with purchases queued or selling.
type batches struct {
	mu   sync.Mutex
	m    map[string]*batcher
	runs sync.WaitGroup // the batchers' loops, which Close waits for
	// closed: Close is waiting for the loops, and no new one starts (under mu).
	closed    bool
	panicHook func() // tests only: runs inside every batch's sale
}

// maxBatch bounds one batch by count. A batch never waits for more purchases: it takes what
// queued while the lock was being acquired, so it is also bounded in time by one lock hand-over.
const maxBatch = 64

// batchBound bounds one batch's transaction, as a change's: its statements and work within the
// transaction budget (txBudget), its COMMIT within the store's read timeout. The batch serves
// many clients, so no single client's context may cancel it.
func (e *Engine) batchBound() time.Duration { return e.txBudget() + e.store().ReadTimeout() }

// batcher coalesces one SKU's concurrent purchases on this replica (mode zk-batch): the purchases
// queue here in arrival order, one goroutine takes the ZooKeeper lock once for the queue head and
// sells a batch in one fenced transaction under that lease. FIFO holds within the replica, and
// between replicas through ZooKeeper's queue.
type batcher struct {
	e   *Engine
	sku string

	mu      sync.Mutex
	queue   []*batchReq
	running bool
}

type batchReq struct {
	ctx    context.Context
	ticket Ticket // the purchase's: the batch checks its pass before its COMMIT
	p      inventory.Purchase
	done   chan batchAnswer
}

type batchAnswer struct {
	res    inventory.Result
	err    error
	repeat bool // the purchase's key repeats an earlier one of its batch: a replay
}

// batcherFor is the SKU's batcher. Batchers exist only while they have work: an idle one drops
// itself from the map (keepRunning), so the map does not grow with every SKU ever sold.
func (e *Engine) batcherFor(sku string) *batcher {
	e.batches.mu.Lock()
	defer e.batches.mu.Unlock()
	b, ok := e.batches.m[sku]
	if !ok {
		b = &batcher{e: e, sku: sku}
		e.batches.m[sku] = b
	}
	return b
}

// sellBatched queues the purchase and waits for its batch.
func (e *Engine) sellBatched(ctx context.Context, t Ticket, p inventory.Purchase) (inventory.Result, error) {
	b := e.batcherFor(p.SKU)
	r := &batchReq{ctx: ctx, ticket: t, p: p, done: make(chan batchAnswer, 1)}
	b.mu.Lock()
	if !b.running {
		// A new loop is counted under batches.mu, which Close takes before it waits: no loop
		// starts once Close waits (a WaitGroup must not grow from zero during a Wait).
		e.batches.mu.Lock()
		closed := e.batches.closed
		if !closed {
			e.batches.runs.Add(1)
		}
		e.batches.mu.Unlock()
		if closed {
			b.mu.Unlock()
			return inventory.Result{}, errShuttingDown
		}
		b.running = true
		go b.run()
	}
	b.queue = append(b.queue, r)
	b.mu.Unlock()
	// As in mode zk, a purchase waits for the lock until its lock deadline: here, for a batch to
	// take it. The batcher may be busy for longer than that (releasing a lease while ZooKeeper is
	// unreachable, say), and the purchase must not wait behind it.
	wait, cancel := context.WithDeadline(ctx, t.lockDeadline)
	defer cancel()
	select {
	case a := <-r.done:
		return a.res, a.err
	case <-wait.Done():
		switch {
		case !b.withdraw(r):
		case ctx.Err() != nil:
			return inventory.Result{}, ctx.Err() // no batch has it: nothing was sold
		default:
			return inventory.Result{}, fmt.Errorf("%w: no batch took the purchase within LOCK_TIMEOUT (%v)", errLockUnavailable, e.cfg.LockTimeout)
		}
	}
	// A batch holds the lock and has the purchase: its answer is the truth, and comes within
	// batchBound, settleBound and the release of its lock (releaseTimeout), whether or not the
	// client is still there to hear it.
	a := <-r.done
	return a.res, a.err
}

// withdraw removes a purchase that no batch has taken yet; false if one has.
func (b *batcher) withdraw(r *batchReq) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.queue, r)
	if i < 0 {
		return false
	}
	b.queue = slices.Delete(b.queue, i, i+1)
	return true
}

// take removes up to n live requests from the head of the queue; requests whose client has gone
// are answered and dropped.
func (b *batcher) take(n int) []*batchReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*batchReq
	for len(b.queue) > 0 && len(batch) < n {
		r := b.queue[0]
		b.queue = b.queue[1:]
		if err := r.ctx.Err(); err != nil {
			r.done <- batchAnswer{err: err}
			continue
		}
		batch = append(batch, r)
	}
	return batch
}

// waiting is a copy of the queue now.
func (b *batcher) waiting() []*batchReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.queue)
}

// takeOnly removes from the queue those of reqs that are still in it.
func (b *batcher) takeOnly(reqs []*batchReq) []*batchReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	var taken []*batchReq
	b.queue = slices.DeleteFunc(b.queue, func(r *batchReq) bool {
		if slices.Contains(reqs, r) {
			taken = append(taken, r)
			return true
		}
		return false
	})
	return taken
}

// keepRunning says whether the loop has work; when it has none it stops and drops the batcher
// from the engine's map, under the same lock that submitters check, so no purchase is left in a
// queue nobody serves. (A submitter that got this batcher just before it was dropped restarts
// its loop; the next submitter for the SKU makes a new one. Both sell correctly: each batch
// takes the SKU's ZooKeeper lock.)
func (b *batcher) keepRunning() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) > 0 {
		return true
	}
	b.running = false
	bs := &b.e.batches
	bs.mu.Lock()
	if bs.m[b.sku] == b {
		delete(bs.m, b.sku)
	}
	bs.mu.Unlock()
	return false
}

func (b *batcher) run() {
	defer b.e.batches.runs.Done()
	for b.keepRunning() {
		b.serveOne()
	}
}

// waitForBatches waits, at most grace, for every batcher's loop to finish its work; no new one
// starts after it began.
func (e *Engine) waitForBatches(grace time.Duration) {
	e.batches.mu.Lock()
	e.batches.closed = true
	e.batches.mu.Unlock()
	done := make(chan struct{})
	go func() { e.batches.runs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		e.log.Warn("zk-batch: batches still selling at shutdown", "waited", grace.String())
	}
}
