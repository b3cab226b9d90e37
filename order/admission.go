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
// ahead here over this replica's rate of leaving is the fleet's queue over the fleet's rate. The
// estimate is then scaled by how the waits it foresaw turned out (skuFlow.scale).
//
// A refused purchase is told when to come back (Retry-After): the time the queue ahead of it
// needs to shrink back within the budget.
type admission struct {
	budget time.Duration    // the longest wait admitted; 0 admits everyone
	now    func() time.Time // the clock ends are timed by; time.Now

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
	// stallEnded is when the last stall ended (a gap stallFactor turns long, a holder killed
	// whose node stayed until its session ended); longGaps counts such gaps in a row.
	stallEnded time.Time
	longGaps   int
}

// stallFactor: a gap between two ends this many turns long is a stall, not a turn. Counted as a
// turn, the stall of a killed holder (its node stays for a session, 4 s) raised the average turn
// a hundredfold, and the waits through it the scale to its bound, so that for many turns after
// it every newcomer was foreseen a queue of stalls and refused: 1,276 of the compose test's
// 1,500 buyers got sku_busy after order2 was killed. Stalls in a row are the new pace (a slower
// mode, a WORK_DELAY raised), and are learnt. A stall is also long in itself (stallFloor, against
// sessions of seconds): zk-batch's purchases end in bursts, a batch's time apart, and a burst's
// first gap, many turns long, is its pace, not a stall.
const (
	stallFactor, stallsInARowLearnt = 8, 3
	stallFloor                      = time.Second
	// stallAfterTurns: a cold start's first turns are still being corrected (the first is shared
	// out among everyone then in flight), so that a gap long next to them is no stall.
	stallAfterTurns = 4
)

// turnWindow is how many turns the moving average weighs: enough to smooth one slow turn, few
// enough to follow a change of mode or of WORK_DELAY within a fraction of a second.
const turnWindow = 32

// turnEnd is how an admitted purchase ended, as leave takes it.
type turnEnd struct {
	// turned: it had its turn of the lock (it sold, or found the stock short under it), which
	// is what admission measures.
	turned bool
	// left is the stock its turn left: the sale's remaining stock, or, found short under the
	// lock, one less than it asked for (at most what is left); -1 when not known.
	left int64
}

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
	return &admission{budget: budget, now: time.Now, skus: map[string]*skuFlow{}}
}

// enter admits a purchase of sku sold in mode, or refuses it with *errSKUBusy. An admitted
// purchase calls leave once it is answered, whatever the answer, saying whether it had its turn
// (it reached the critical section: sold, or found the stock short under the lock). A turn's
// length is the mode's: each mode's flow of a SKU is measured apart, so that a switch from a
// fast mode does not leave its turns to judge a slow one by.
func (a *admission) enter(sku string, mode LockMode, qty int64, now time.Time) (leave func(turnEnd), err error) {
	sku = string(mode) + "/" + sku
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.skus[sku]
	if f == nil {
		f = &skuFlow{scale: 1}
		a.skus[sku] = f
	}
	raw := f.foreseen()
	if wait := time.Duration(float64(raw) * f.scale); a.budget > 0 && wait > a.budget {
		return nil, &errSKUBusy{wait: wait, retryAfter: wait - a.budget}
	}
	if f.inFlight == 0 {
		f.since = now
	}
	f.inFlight++
	return func(end turnEnd) { a.leave(sku, f, now, raw, end) }, nil
}

// foreseen is the wait of a purchase arriving now: those ahead of it, one turn each. A turn that
// runs long (a holder killed, whose node stays until its session ends; a database that stalls)
// is not counted as a queue: refusing newcomers through it refused 875 of 1,500 buyers in the
// compose test of a killed replica, who would have been served once the session ended, within
// LOCK_TIMEOUT, which still bounds their wait.
func (f *skuFlow) foreseen() time.Duration {
	if f.inFlight == 0 || f.turns == 0 {
		return 0 // nobody ahead, or no turn measured yet: admit, and learn
	}
	return time.Duration(f.inFlight) * f.turn
}

// Bounds of skuFlow.scale: a few odd waits must not make the estimate refuse everyone, nor admit
// everyone.
const minScale, maxScale = 0.5, 2.0

func (a *admission) leave(sku string, f *skuFlow, entered time.Time, foreseen time.Duration, end turnEnd) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now() // under the lock: ends racing for it must not make a gap run backwards
	f.inFlight--
	if !end.turned {
		// Sent away from the queue, or timed out: no turn was served, and the burst of ends
		// when a sold-out product's queue is sent away would read as turns of no length.
		if f.inFlight == 0 {
			f.since = now
		}
		return
	}
	gap := now.Sub(f.since)
	stalled := false
	if f.turns >= stallAfterTurns && gap > max(stallFactor*f.turn, stallFloor) {
		f.longGaps++
		stalled = f.longGaps < stallsInARowLearnt
	} else {
		f.longGaps = 0
	}
	if stalled {
		f.stallEnded = now
	}
	// Only a purchase that found a queue of a few turns says how good the estimate is; one that
	// found none would weigh its own turn's noise, and one that waited through a stall the stall.
	if !stalled && f.turn > 0 && foreseen >= 2*f.turn && entered.After(f.stallEnded) {
		ratio := float64(now.Sub(entered)) / float64(foreseen+f.turn)
		f.scale = min(maxScale, max(minScale, f.scale+(ratio-f.scale)/turnWindow))
	}
	if f.turns == 0 {
		// The first end after a cold start ended a time in which everyone then in flight was
		// served side by side (db-cas, none) or queued (the locks): counted as one turn, it made
		// a turn of a whole first request, slow with cold connections, and 66 in flight times
		// that refused db-cas purchases that were served in milliseconds. Shared out, it
		// underestimates a queue's turn instead, which the next ends correct.
		gap /= time.Duration(f.inFlight + 1)
	}
	if !stalled {
		f.turns = min(f.turns+1, turnWindow)
		f.turn += (gap - f.turn) / time.Duration(f.turns)
	}
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
