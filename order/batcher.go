package order

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/inventory"
)

// maxBatch bounds one batch by count. A batch never waits for more purchases: it takes what
// queued while the lock was being acquired, so it is also bounded in time by one lock hand-over.
const maxBatch = 64

// batchTimeout bounds one batch's transaction; the batch serves many clients, so no single
// client's context may cancel it.
const batchTimeout = 30 * time.Second

// batcher coalesces one SKU's concurrent purchases on this replica (mode zk-batch): the purchases
// queue here in arrival order, one goroutine takes the ZooKeeper lock once for the queue head and
// sells a batch in one fenced transaction under that lease. FIFO holds within the replica, and
// between replicas through ZooKeeper's queue.
type batcher struct {
	s   *Server
	sku string

	mu      sync.Mutex
	queue   []*batchReq
	running bool
}

type batchReq struct {
	ctx  context.Context
	p    inventory.Purchase
	done chan batchAnswer
}

type batchAnswer struct {
	res inventory.Result
	err error
}

func (s *Server) batcherFor(sku string) *batcher {
	s.batchersMu.Lock()
	defer s.batchersMu.Unlock()
	b, ok := s.batchers[sku]
	if !ok {
		b = &batcher{s: s, sku: sku}
		s.batchers[sku] = b
	}
	return b
}

// sellBatched queues the purchase and waits for its batch.
func (s *Server) sellBatched(ctx context.Context, p inventory.Purchase) (inventory.Result, error) {
	b := s.batcherFor(p.SKU)
	r := &batchReq{ctx: ctx, p: p, done: make(chan batchAnswer, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, r)
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	// As in mode zk, a purchase waits at most LOCK_TIMEOUT for the lock: here, for a batch to take
	// it. The batcher may be busy for longer than that (releasing a lease while ZooKeeper is
	// unreachable, say), and the purchase must not wait behind it.
	timer := time.NewTimer(s.cfg.LockTimeout)
	defer timer.Stop()
	select {
	case a := <-r.done:
		return a.res, a.err
	case <-timer.C:
		if b.withdraw(r) {
			return inventory.Result{}, fmt.Errorf("%w: no batch took the purchase within %v", errLockUnavailable, s.cfg.LockTimeout)
		}
	case <-ctx.Done():
		if b.withdraw(r) {
			return inventory.Result{}, ctx.Err() // no batch has it: nothing was sold
		}
	}
	// A batch holds the lock and has the purchase: its answer is the truth, and comes within
	// batchTimeout, whether or not the client is still there to hear it.
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

// keepRunning says whether the loop has work; when it has none it stops, under the same lock
// that submitters check, so no purchase is left in a queue nobody serves.
func (b *batcher) keepRunning() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.running = false
		return false
	}
	return true
}

func (b *batcher) run() {
	for b.keepRunning() {
		b.serveOne()
	}
}

// serveOne takes the lock, sells one batch and releases the lock.
func (b *batcher) serveOne() {
	var lease *dlock.Lease
	err := b.s.withLock(context.Background(), b.s.log.With("sku", b.sku), func(lockCtx context.Context) (release, error) {
		l, err := dlock.NewMutex(b.s.locks, lockPath(b.sku)).Lock(lockCtx)
		if err != nil {
			return nil, err
		}
		lease = l
		return l.Unlock, nil
	}, func() error {
		batch := b.take(maxBatch)
		if len(batch) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		defer cancel()
		for i, a := range b.sell(ctx, lease, batch) {
			batch[i].done <- a
		}
		return nil
	})
	if err != nil {
		// Everyone who waited through this attempt gets the same answer as in mode zk.
		for _, r := range b.take(math.MaxInt) {
			r.done <- batchAnswer{err: err}
		}
	}
}

// sell does every purchase's work at once (the simulated payment calls run side by side), then
// the whole batch in one fenced transaction.
func (b *batcher) sell(ctx context.Context, lease *dlock.Lease, batch []*batchReq) []batchAnswer {
	s := b.s
	answers := make([]batchAnswer, len(batch))
	workErrs := make([]error, len(batch))
	var wg sync.WaitGroup
	for i := range batch {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			workErrs[i] = s.work(lease)(ctx)
		}(i)
	}
	wg.Wait()
	if err := errors.Join(workErrs...); err != nil {
		for i := range answers {
			answers[i].err = err
		}
		return answers
	}
	items := make([]inventory.BatchItem, len(batch))
	for i, r := range batch {
		items[i].Purchase = r.p
		items[i].Purchase.Token = lease.Token()
	}
	beforeCommit := stillHeld(lease)
	err := s.store.DeductBatch(ctx, b.sku, lease.Token(), items, beforeCommit)
	if errors.Is(err, inventory.ErrBatchConflict) {
		// A key of the batch was used for another SKU meanwhile: sell one by one, still under
		// this lease, so that only the conflicting purchase is refused.
		for i, it := range items {
			answers[i].res, answers[i].err = s.store.Deduct(ctx, it.Purchase, inventory.Fenced, inventory.Hooks{BeforeCommit: beforeCommit})
		}
		return answers
	}
	for i, it := range items {
		answers[i] = batchAnswer{res: it.Result, err: it.Err}
		if err != nil {
			answers[i] = batchAnswer{err: err}
		}
	}
	return answers
}
