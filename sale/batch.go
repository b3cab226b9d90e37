package sale

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// errBatchPanicked: a batch's sale panicked; whether it committed is learnt by each purchase's key.
var errBatchPanicked = errors.New("zk-batch: the batch's sale panicked")

// serveOne sells one batch as a change of its own, through the one dispatch (run) under the
// batching mode's row: the lock as the row says, the purchases taken from the queue once it is
// held, one fenced transaction, and settle for an unanswered COMMIT, all before the release. A
// failure to take the lock fails only the purchases that were waiting when this attempt began:
// those that came during it get an attempt of their own, with their own LOCK_TIMEOUT.
func (b *batcher) serveOne() {
	waiting := b.waiting()
	lm, err := modeOf(ModeZKBatch)
	if err != nil {
		b.failWaiting(waiting, err)
		return
	}
	log := NewLog(b.e.log, slog.String("sku", b.sku), slog.String("mode", string(ModeZKBatch)))
	bt := &batch{b: b, log: log}
	// The batch is no client's: it has LOCK_TIMEOUT from now for the lock, and batchBound for its
	// transaction once it holds it. Every purchase of the batch holds a pass of the fleet in
	// zk-batch until it is answered; the batch checks them all before its COMMIT (admitted).
	t := Ticket{mode: lm, lockDeadline: time.Now().Add(b.e.cfg.LockTimeout)}
	err = b.e.run(context.Background(), t, log, change{skus: []string{b.sku}, apply: bt.apply, resolve: bt.resolve, admitted: bt.admitted})
	if bt.reqs == nil {
		if err != nil {
			b.failWaiting(waiting, err)
		}
		return
	}
	for i, a := range bt.answers {
		bt.reqs[i].done <- a
	}
}

// failWaiting gives everyone who waited through a failed attempt the same answer as in mode zk.
func (b *batcher) failWaiting(waiting []*batchReq, err error) {
	for _, r := range b.takeOnly(waiting) {
		r.done <- batchAnswer{err: err}
	}
}

// batch is one batch of purchases as a change: its requests, taken once the lock is held, and
// their answers, which settle resolves by their keys when the batch's COMMIT goes unanswered.
type batch struct {
	b       *batcher
	log     Log
	reqs    []*batchReq
	answers []batchAnswer
	settled int // resolve's rounds so far
}

// admitted checks every purchase's pass of the fleet: none is sold unadmitted.
func (bt *batch) admitted() error {
	errs := make([]error, 0, len(bt.reqs))
	for _, r := range bt.reqs {
		if r.ticket.pass == nil {
			return errNotAdmitted
		}
		errs = append(errs, stillAdmitted(r.ticket.pass)())
	}
	return errors.Join(errs...)
}

// apply takes the purchases queued (up to maxBatch) and sells them in one transaction. It returns
// an error wrapping inventory.ErrOutcomeUnknown when some answers are not known, for settle.
func (bt *batch) apply(ctx context.Context, m inventory.Mode, f fencing, hooks inventory.Hooks) error {
	bt.reqs = bt.b.take(maxBatch)
	if len(bt.reqs) == 0 {
		bt.reqs = nil
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, bt.b.e.batchBound())
	defer cancel()
	fence := inventory.Fence{Issuer: f.issuer, Token: f.tokens[bt.b.sku]}
	bt.answers = bt.sellRecovering(ctx, m, fence, hooks)
	var unknown error
	for _, a := range bt.answers {
		if errors.Is(a.err, inventory.ErrOutcomeUnknown) && (unknown == nil || inventory.UnansweredConn(a.err).ID != 0) {
			unknown = a.err // one transaction: an unanswered purchase names its connection
		}
	}
	return unknown
}

// resolve learns, by their keys and within one resolveBudget, what became of the purchases whose
// outcome the batch left unknown: on the first round those the COMMIT (or a panic) left unknown,
// on a later round those the first could not learn. A repeat of an earlier purchase of the batch
// is answered as the replay it is. It returns errOutcomeUnknown while any is still unknown.
func (bt *batch) resolve(ctx context.Context, _ error) error {
	bt.settled++
	unknown := func(err error) bool { return errors.Is(err, errOutcomeUnknown) }
	if bt.settled == 1 {
		unknown = func(err error) bool { return errors.Is(err, inventory.ErrOutcomeUnknown) }
	}
	rctx, cancel := budget(ctx)
	defer cancel()
	var open error
	for i, a := range bt.answers {
		if !unknown(a.err) {
			continue
		}
		p := bt.reqs[i].p
		res, err := bt.b.e.resolvePurchase(rctx, p, a.err, bt.log.With(slog.String("request_id", p.RequestID)))
		if err == nil {
			// A repeat replays; so does a purchase whose look-up could not give the stock right
			// after it (resolvePurchase).
			res.Replayed = res.Replayed || a.repeat
		}
		bt.answers[i] = batchAnswer{res: res, err: err, repeat: a.repeat}
		if errors.Is(err, errOutcomeUnknown) {
			open = err
		}
	}
	return open
}

// sellRecovering is sell, but a panic in it fails this batch's purchases instead of the replica.
// The panic may have come after the commit, so the answer is "outcome unknown", which each
// purchase resolves by its key before its client hears anything.
func (bt *batch) sellRecovering(ctx context.Context, m inventory.Mode, fence inventory.Fence, hooks inventory.Hooks) (answers []batchAnswer) {
	e := bt.b.e
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("zk-batch: a batch panicked; its purchases are resolved by their keys",
				"sku", bt.b.sku, "purchases", len(bt.reqs), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err := fmt.Errorf("%w: %w: %v", inventory.ErrOutcomeUnknown, errBatchPanicked, r)
			answers = make([]batchAnswer, len(bt.reqs))
			for i := range answers {
				answers[i].err = err
			}
		}
	}()
	if e.batches.panicHook != nil {
		e.batches.panicHook()
	}
	return bt.sell(ctx, m, fence, hooks)
}

// sell does every purchase's work at once (the simulated payment calls run side by side), then
// the whole batch in one fenced transaction.
func (bt *batch) sell(ctx context.Context, m inventory.Mode, fence inventory.Fence, hooks inventory.Hooks) []batchAnswer {
	e, batch := bt.b.e, bt.reqs
	answers := make([]batchAnswer, len(batch))
	workErrs := make([]error, len(batch))
	var wg sync.WaitGroup
	for i := range batch {
		wg.Go(func() { workErrs[i] = hooks.Work(ctx) })
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
	err := e.store().DeductBatch(ctx, bt.b.sku, fence, items, hooks.BeforeCommit)
	if errors.Is(err, inventory.ErrBatchConflict) {
		// A key of the batch was used for another SKU meanwhile: sell one by one, still under
		// this lease, so that only the conflicting purchase is refused.
		for i, it := range items {
			answers[i].res, answers[i].err = e.store().Deduct(ctx, it.Purchase, m, inventory.Hooks{BeforeCommit: hooks.BeforeCommit})
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
