package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// maxBatch bounds one batch by count. A batch never waits for more purchases: it takes what
// queued while the lock was being acquired, so it is also bounded in time by one lock hand-over.
const maxBatch = 64

// batchBound bounds one batch's transaction, as a change's: its statements and work within the
// transaction budget (txBudget), its COMMIT within the store's read timeout. The batch serves
// many clients, so no single client's context may cancel it.
func (s *Server) batchBound() time.Duration { return s.txBudget() + s.store.ReadTimeout() }

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
	res    inventory.Result
	err    error
	repeat bool // the purchase's key repeats an earlier one of its batch: a replay
}

// batcherFor is the SKU's batcher. Batchers exist only while they have work: an idle one drops
// itself from the map (keepRunning), so the map does not grow with every SKU ever sold.
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
	if !b.running {
		// A new loop is counted under batchersMu, which Close takes before it waits: no loop
		// starts once Close waits (a WaitGroup must not grow from zero during a Wait).
		s.batchersMu.Lock()
		closed := s.batchesClosed
		if !closed {
			s.batchRuns.Add(1)
		}
		s.batchersMu.Unlock()
		if closed {
			b.mu.Unlock()
			return inventory.Result{}, errShuttingDown
		}
		b.running = true
		go b.run()
	}
	b.queue = append(b.queue, r)
	b.mu.Unlock()
	// As in mode zk, a purchase waits for the lock until its lock deadline (lockWait): here, for a
	// batch to take it. The batcher may be busy for longer than that (releasing a lease while
	// ZooKeeper is unreachable, say), and the purchase must not wait behind it.
	wait, cancel := s.lockWait(ctx)
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
			return inventory.Result{}, fmt.Errorf("%w: no batch took the purchase within LOCK_TIMEOUT (%v)", errLockUnavailable, s.cfg.LockTimeout)
		}
	}
	// A batch holds the lock and has the purchase: its answer is the truth, and comes within
	// batchBound and settleBound, whether or not the client is still there to hear it.
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
// from the server's map, under the same lock that submitters check, so no purchase is left in a
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
	b.s.batchersMu.Lock()
	if b.s.batchers[b.sku] == b {
		delete(b.s.batchers, b.sku)
	}
	b.s.batchersMu.Unlock()
	return false
}

func (b *batcher) run() {
	defer b.s.batchRuns.Done()
	for b.keepRunning() {
		b.serveOne()
	}
}

// waitForBatches waits, at most grace, for every batcher's loop to finish its work; no new one
// starts after it began.
func (s *Server) waitForBatches(grace time.Duration) {
	s.batchersMu.Lock()
	s.batchesClosed = true
	s.batchersMu.Unlock()
	done := make(chan struct{})
	go func() { s.batchRuns.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		s.log.Warn("zk-batch: batches still selling at shutdown", "waited", grace.String())
	}
}

// errShuttingDown: the replica is closing and takes no new batch; nothing was sold.
var errShuttingDown = errors.New("the replica is shutting down")

// errBatchPanicked: a batch's sale panicked; whether it committed is learnt by each purchase's key.
var errBatchPanicked = errors.New("zk-batch: the batch's sale panicked")

// serveOne takes the lock as the mode's row says, sells one batch and releases the lock. A failure
// to take the lock fails only the purchases that were waiting when this attempt began: those that
// came during it get an attempt of their own, with their own LOCK_TIMEOUT.
func (b *batcher) serveOne() {
	waiting := b.waiting()
	// Every purchase of the batch holds a pass of the fleet in zk-batch until it is answered; the
	// batch checks them all before its commit (sell).
	lm, err := modeOf(ModeZKBatch)
	if err != nil {
		b.failWaiting(waiting, err)
		return
	}
	log := newRequestLog(b.s.log, slog.String("sku", b.sku), slog.String("mode", string(ModeZKBatch)))
	var held holding
	err = b.s.withLock(context.Background(), log, func(lockCtx context.Context) (release, error) {
		h, err := lm.lock(b.s, lockCtx, []string{b.sku})
		if err != nil {
			return nil, err
		}
		held = h
		return h.Unlock, nil
	}, func() error {
		batch := b.take(maxBatch)
		if len(batch) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.s.batchBound())
		defer cancel()
		fence := inventory.Fence{Issuer: lm.issuer, Token: held.Tokens()[b.sku]}
		for i, a := range b.settle(ctx, batch, b.sellRecovering(ctx, held, fence, batch), log) {
			batch[i].done <- a
		}
		return nil
	})
	if err != nil {
		b.failWaiting(waiting, err)
	}
}

// failWaiting gives everyone who waited through a failed attempt the same answer as in mode zk.
func (b *batcher) failWaiting(waiting []*batchReq, err error) {
	for _, r := range b.takeOnly(waiting) {
		r.done <- batchAnswer{err: err}
	}
}

// settle resolves, still under the lease, the purchases whose outcome the batch left unknown (an
// unanswered COMMIT, a panic), each by its key, as every mode settles before it releases. They
// share one budget and one wait: the batch was one transaction, and one COMMIT went unanswered.
// A repeat of an earlier purchase of the batch is answered as the replay it is.
func (b *batcher) settle(ctx context.Context, batch []*batchReq, answers []batchAnswer, log requestLog) []batchAnswer {
	unanswered := time.Now() // the COMMIT was sent before this
	resolve := func(unknown func(error) bool) (open bool, conn inventory.ServerConn) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveBudget)
		defer cancel()
		for i, a := range answers {
			if !unknown(a.err) {
				continue
			}
			if c := inventory.UnansweredConn(a.err); c.ID != 0 {
				conn = c // one transaction: every unanswered purchase names its connection
			}
			p := batch[i].p
			res, err := b.s.resolvePurchase(rctx, p, a.err, log.with(slog.String("request_id", p.RequestID)))
			if err == nil {
				// A repeat replays; so does a purchase whose look-up could not give the stock
				// right after it (resolvePurchase).
				res.Replayed = res.Replayed || a.repeat
			}
			answers[i] = batchAnswer{res: res, err: err, repeat: a.repeat}
			open = open || errors.Is(err, errOutcomeUnknown)
		}
		return open, conn
	}
	open, conn := resolve(func(err error) bool { return errors.Is(err, inventory.ErrOutcomeUnknown) })
	// As run's settle does: while the server still shows the batch's transaction, its COMMIT may
	// yet apply, and the lock (and the purchases' passes of the fleet) must be kept; once it is
	// gone, the keys' orders are final.
	if open && b.s.waitWhileAlive(ctx, conn, log) {
		open, _ = resolve(func(err error) bool { return errors.Is(err, errOutcomeUnknown) })
	}
	if wait := time.Until(unanswered.Add(b.s.store.CommitBound())); open && wait > 0 {
		log.Warn("zk-batch: outcomes unknown: keeping the lock until the commit can no longer apply", "wait", wait.String())
		time.Sleep(wait)
	}
	return answers
}

// sellRecovering is sell, but a panic in it fails this batch's purchases instead of the replica.
// The panic may have come after the commit, so the answer is "outcome unknown", which each
// purchase resolves by its key before its client hears anything.
func (b *batcher) sellRecovering(ctx context.Context, held holding, fence inventory.Fence, batch []*batchReq) (answers []batchAnswer) {
	defer func() {
		if r := recover(); r != nil {
			b.s.log.Error("zk-batch: a batch panicked; its purchases are resolved by their keys",
				"sku", b.sku, "purchases", len(batch), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err := fmt.Errorf("%w: %w: %v", inventory.ErrOutcomeUnknown, errBatchPanicked, r)
			answers = make([]batchAnswer, len(batch))
			for i := range answers {
				answers[i].err = err
			}
		}
	}()
	if b.s.batchPanic != nil {
		b.s.batchPanic()
	}
	return b.sell(ctx, held, fence, batch)
}

// sell does every purchase's work at once (the simulated payment calls run side by side), then
// the whole batch in one fenced transaction.
func (b *batcher) sell(ctx context.Context, held holding, fence inventory.Fence, batch []*batchReq) []batchAnswer {
	s := b.s
	answers := make([]batchAnswer, len(batch))
	workErrs := make([]error, len(batch))
	var wg sync.WaitGroup
	for i := range batch {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			workErrs[i] = s.work(held)(ctx)
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
		items[i].Purchase.Issuer, items[i].Purchase.Token = fence.Issuer, fence.Token
	}
	beforeCommit := func() error {
		errs := []error{stillHeld(held)()}
		for _, r := range batch {
			p := passOf(r.ctx)
			if p == nil {
				return errNotAdmitted // never sold unadmitted
			}
			errs = append(errs, stillAdmitted(p)())
		}
		return errors.Join(errs...)
	}
	err := s.store.DeductBatch(ctx, b.sku, fence, items, beforeCommit)
	if errors.Is(err, inventory.ErrBatchConflict) {
		// A key of the batch was used for another SKU meanwhile: sell one by one, still under
		// this lease, so that only the conflicting purchase is refused.
		for i, it := range items {
			answers[i].res, answers[i].err = s.store.Deduct(ctx, it.Purchase, inventory.Fenced, inventory.Hooks{BeforeCommit: beforeCommit})
		}
		return answers
	}
	for i, it := range items {
		answers[i] = batchAnswer{res: it.Result, err: it.Err, repeat: it.Repeat}
		if err != nil && !errors.Is(err, inventory.ErrOutcomeUnknown) {
			answers[i] = batchAnswer{err: err} // the whole batch failed; DeductBatch marked the unknown ones itself
		}
	}
	return answers
}
