package order

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Admission control: a purchase that cannot be served within its budget is refused at once,
// instead of queueing for LOCK_TIMEOUT and being refused then. Past a hot SKU's capacity its
// queue only grows; every waiter that times out has cost the queue a create and a delete (the
// writes the holders need), and everyone behind it a longer read of the queue, so the service
// sold less the more it was asked: a third of its capacity at 7× the load. Refused at the door, a
// purchase costs nothing of the SKU's: no node, no read, no connection.
//
// The decision rests on what this replica measures of the SKU, not on a queue length someone
// must tune. By Little's law the time a newcomer will wait is the number ahead of it over the
// rate at which they leave. This replica counts the SKU's purchases in flight here, and times the
// gaps between their ends while the SKU was busy (a gap measured while nobody waited would time
// the arrivals, not the service): the gap's moving average is the time one turn takes, whatever
// makes it up (the hand-off, the transaction, WORK_DELAY, the lock mode). The fleet's queue is
// first come, first served, and each replica takes its share of the arrivals, so the purchases
// ahead here over this replica's rate of leaving is the fleet's queue over the fleet's rate. When
// ends stop (a lock or a database that stopped answering), the time since the last one is added
// to the wait, so a stalled SKU refuses newcomers rather than queueing them for nothing.
//
// A refused purchase is told when to come back (Retry-After): the time the queue ahead of it
// needs to shrink back within the budget.
type admission struct {
	budget time.Duration // the longest wait admitted; 0 admits everyone

	mu   sync.Mutex
	skus map[string]*skuFlow
}

// skuFlow is one SKU's purchases on this replica.
type skuFlow struct {
	inFlight int       // admitted, not answered
	since    time.Time // the later of the last end and the moment inFlight last rose from 0
	// turn is the moving average of the gaps between ends while the SKU was busy: a gap starts
	// at the previous end, or where the busy spell began if that is later.
	turn  time.Duration
	turns int // gaps measured, up to turnWindow
	// scale corrects the foreseen wait by what the waits turned out to be: the moving average of
	// (time in flight) / (foreseen wait + a turn) over the purchases that found a queue. The turns
	// of the replicas interleave unevenly, and a purchase spends time beside its turn (its node's
	// create, the hand-off to it); measured on three replicas in a flash sale, the plain estimate
	// foresaw 1 s for waits of 1.36 s on average. 1 until measured.
	scale float64
}

// turnWindow is how many turns the moving average weighs: enough to smooth one slow turn, few
// enough to follow a change of mode or of WORK_DELAY within a fraction of a second.
const turnWindow = 32

// errSKUBusy refuses a purchase that would wait longer than the budget.
type errSKUBusy struct {
	wait       time.Duration // the wait foreseen
	retryAfter time.Duration
}

func (e *errSKUBusy) Error() string {
	return fmt.Sprintf("the product's queue would hold this purchase about %v, longer than the budget", e.wait.Round(time.Millisecond))
}

// retryAfterSeconds is the Retry-After header's value: whole seconds, at least one.
func (e *errSKUBusy) retryAfterSeconds() int {
	return max(1, int(math.Ceil(e.retryAfter.Seconds())))
}

func newAdmission(budget time.Duration) *admission {
	return &admission{budget: budget, skus: map[string]*skuFlow{}}
}

// enter admits a purchase of sku, or refuses it with *errSKUBusy. An admitted purchase calls
// leave once it is answered, whatever the answer.
func (a *admission) enter(sku string, now time.Time) (leave func(), err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.skus[sku]
	if f == nil {
		f = &skuFlow{scale: 1}
		a.skus[sku] = f
	}
	raw := f.foreseen(now)
	if wait := time.Duration(float64(raw) * f.scale); a.budget > 0 && wait > a.budget {
		return nil, &errSKUBusy{wait: wait, retryAfter: wait - a.budget}
	}
	if f.inFlight == 0 {
		f.since = now
	}
	f.inFlight++
	return func() { a.leave(sku, f, now, raw) }, nil
}

// foreseen is the wait of a purchase arriving now: those ahead of it, one turn each.
func (f *skuFlow) foreseen(now time.Time) time.Duration {
	if f.inFlight == 0 {
		return 0
	}
	// A turn running longer than the average (a stall, or a cold SKU's first turn, with no
	// average yet) adds what it has run past it, once: the turn in progress is that long, but
	// nothing says the turns after it will be. Counting it once per purchase ahead refused a
	// burst at a cold SKU whose first purchase was slow to end (67 in flight 300 ms "foresaw"
	// 20 s: a loaded machine's test refused 23 of 200 buyers a 15 s budget would have served).
	// A stall still refuses newcomers once it alone passes the budget, and ends as soon as a
	// purchase does.
	wait := time.Duration(f.inFlight) * f.turn
	if over := now.Sub(f.since) - f.turn; over > 0 {
		wait += over
	}
	return wait
}

// Bounds of skuFlow.scale: a few odd waits must not make the estimate refuse everyone, nor admit
// everyone.
const minScale, maxScale = 0.5, 4.0

func (a *admission) leave(sku string, f *skuFlow, entered time.Time, foreseen time.Duration) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	// Only a purchase that found a queue of a few turns says how good the estimate is; one that
	// found none would weigh its own turn's noise.
	if f.turn > 0 && foreseen >= 2*f.turn {
		ratio := float64(now.Sub(entered)) / float64(foreseen+f.turn)
		f.scale = min(maxScale, max(minScale, f.scale+(ratio-f.scale)/turnWindow))
	}
	f.inFlight--
	f.turns = min(f.turns+1, turnWindow)
	f.turn += (now.Sub(f.since) - f.turn) / time.Duration(f.turns)
	f.since = now
	if f.inFlight == 0 && len(a.skus) > maxKnownSKUs {
		delete(a.skus, sku) // bounded like the SKUs a replica remembers; relearnt if it comes back
	}
}

// isSKUBusy says whether err is a refusal by admission control.
func isSKUBusy(err error) bool {
	_, ok := asSKUBusy(err)
	return ok
}

func asSKUBusy(err error) (*errSKUBusy, bool) {
	var busy *errSKUBusy
	return busy, errors.As(err, &busy)
}
