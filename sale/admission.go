package sale

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Admission control: a purchase that cannot be served within its budget is refused at once,
// instead of queueing for LOCK_TIMEOUT and being refused then. Past a hot SKU's capacity its
// queue only grows, and every waiter that times out costs the holders ZooKeeper's writes; refused
// at the door, a purchase costs nothing of the SKU's: no node, no read, no connection.
//
// The rule: a purchase is refused when its foreseen wait, times a correction learnt from how the
// waits foreseen here turned out, is longer than the budget. The foreseen wait rests on what is
// measured of the SKU, never on a queue length someone must tune:
//
//   - the queue, where the mode queues in ZooKeeper (lockMode.fleetQueue): the contenders of the
//     whole fleet's queue there, one turn each at the rate nodes leave it (fleetqueue.go), and
//     the purchase's own turn; the correction is estimateError's margin, at least 1.
//   - the queue, in the other modes: the purchases ahead of it here, one turn each (Little's law
//     on this replica's share of the queue). A turn is the moving average of the gaps between
//     ends here while the SKU was busy, and at least their mean over the last budget
//     (skuFlow.paced). The purchase's own turn is waited for too; the correction is
//     skuFlow.scale.
//   - the stock: a purchase behind more demand than the stock left does not wait for the whole
//     queue; the sell-out answers it (soldout.go sends a sold-out product's queue away). So the
//     wait is at most the turns the stock left can last, plus a turn and a poll for the sell-out
//     to reach it (sellOutWait).
//
// It is an estimate, never a safety decision: a refusal sells nothing and queues nothing, and an
// admitted purchase's wait is still bounded by LOCK_TIMEOUT; every out_of_stock still rests on a
// read of the stock (soldout.go), whatever admission foresaw.
//
// A refused purchase is told when to come back (Retry-After): the time the queue ahead of it
// needs to shrink back within the budget.
type admission struct {
	budget time.Duration    // the longest wait admitted; 0 admits everyone
	now    func() time.Time // the clock ends are timed by; time.Now
	// fleet, when set, gives a mode's queue of a SKU as the whole fleet holds it: the contenders
	// in it, the turn it moves at and its last disturbance (fleetqueue.go); ok is false when the
	// mode has no such queue, or it has not been measured. The wait is then foreseen from it
	// (foreseenInFleet).
	fleet func(sku string, mode LockMode) (v queueView, ok bool)

	// falseRefusal, when set, is called for each refusal found false: its buyer would have been
	// served within the budget by the queue it would have joined (fleetqueue.go judge). Only
	// the refusals foreseen from the fleet's queue are judged; took is how long the queue it
	// would have joined took to pass. It must not call admission.
	falseRefusal func(c refusalCheck, took time.Duration)

	mu   sync.Mutex
	skus map[string]*skuFlow
}

// skuFlow is one SKU's purchases on this replica.
type skuFlow struct {
	inFlight int       // admitted, not answered
	units    int64     // the units inFlight ask for
	since    time.Time // the later of the last end and the moment inFlight last rose from 0
	// turn is the moving average of the gaps between ends while the SKU was busy: a gap starts
	// at the previous end, or where the busy spell began if that is later.
	turn  time.Duration
	turns int // gaps measured, up to turnWindow
	// scale corrects the foreseen wait by what the waits turned out to be: the recent average of
	// (time in flight) / (foreseen wait + a turn) over the purchases that found a queue, prior 1
	// (scaleAt). A purchase spends time beside its turn (its node's create, the hand-off to it),
	// and the replicas' turns interleave unevenly.
	scale recent
	// stallEnded is when the last stall ended (a gap stallFactor turns long, a holder killed
	// whose node stayed until its session ended); longGaps counts such gaps in a row. A wait
	// that began before it overlapped the stall, and is not learnt (overlapped).
	stallEnded time.Time
	longGaps   int
	// ends are the times of the turns here that ended within a budget of the last one, in this
	// busy spell and since the last stall; paced is their mean gap once they are more than
	// turnWindow, else 0. A turn is foreseen at least that long (foreseen).
	ends  []time.Time
	paced time.Duration

	// fleetErr is how the waits foreseen from the fleet's queue turned out (estimateerror.go).
	fleetErr estimateError

	// stock is the SKU's stock as last seen here, at stockSeen: the stock a turn here left, or
	// a read of it (noteStock). Zero stockSeen: not seen.
	stock     int64
	stockSeen time.Time
	// drain is the moving average of the units the fleet sold per turn here: the stock's fall
	// between two turns here that saw it (drains of them, up to turnWindow). lastLeft is the
	// stock the last of them left, -1 if none.
	drain    float64
	drains   int
	lastLeft int64
}

// stallFactor: a gap between two ends this many turns long is a stall, not a turn, and is not
// learnt: the stall of a killed holder (its node stays for a session) would raise the average
// turn a hundredfold, and every newcomer after it would be foreseen a queue of stalls and
// refused. Stalls in a row are the new pace (a slower mode, a WORK_DELAY raised), and are learnt. A stall is also long in itself (stallFloor, against
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
	// timedOut: it waited LOCK_TIMEOUT for its turn and gave up (lock_unavailable).
	timedOut bool
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
func (e *errSKUBusy) retryAfterSeconds() int { return wholeSeconds(e.retryAfter) }

// wholeSeconds is d in whole seconds, rounded up, at least one.
func wholeSeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

func newAdmission(budget time.Duration) *admission {
	return &admission{budget: budget, now: time.Now, skus: map[string]*skuFlow{}}
}

// enter admits a purchase of qty units of sku sold in mode, or refuses it with *errSKUBusy. An
// admitted purchase calls leave once it is answered, whatever the answer, saying how it ended.
// Each mode's flow of a SKU is measured apart, so that a switch from a fast mode does not leave
// its turns to judge a slow one by.
func (a *admission) enter(key string, mode LockMode, qty int64, now time.Time) (leave func(turnEnd), err error) {
	sku := string(mode) + "/" + key
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.skus[sku]
	if f == nil {
		f = &skuFlow{lastLeft: -1, scale: recent{trusted: estimateWindow}, fleetErr: newEstimateError()}
		a.skus[sku] = f
	}
	own := f.foreseen(now, a.budget) // from this replica's own measures, which leave learns from
	raw := own
	// Its own turn is waited for too.
	wait := time.Duration(float64(raw+f.turn) * f.scaleAt(now))
	waits := waitsForeseen{own: own}
	var view queueView // the fleet's queue it was foreseen from, if it was
	if a.fleet != nil {
		if v, ok := a.fleet(key, mode); ok {
			raw = f.foreseenInFleet(now, a.budget, v.contenders, v.turn)
			if raw >= 2*v.turn { // found a queue: its error is learnt (fleetErr)
				waits.fleet = raw + v.turn
			}
			wait = time.Duration(float64(raw+v.turn) * f.fleetErr.margin(now))
			view = v
		}
	}
	if raw > 0 && a.budget > 0 && wait > a.budget {
		if a.falseRefusal != nil {
			view.watch(refusalCheck{sku: key, at: now, foreseen: wait, turn: view.turn, budget: a.budget, falseRefusal: a.falseRefusal})
		}
		return nil, &errSKUBusy{wait: wait, retryAfter: wait - a.budget}
	}
	if f.inFlight == 0 {
		f.since = now
		f.ends, f.paced = f.ends[:0], 0
	}
	f.inFlight++
	f.units += qty
	return func(end turnEnd) {
		a.leave(flowKey{key, mode, sku}, f, now, waits, qty, end)
	}, nil
}

// noteStock takes sku's stock as a read at now showed it (the sold-out poller's, or one before a
// purchase queued), or, with a negative stock, a restock here of an amount not known: the stock
// the foreseen waits of every mode's flow of sku rest on, until a turn here sees it.
func (a *admission) noteStock(sku string, stock int64, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, lm := range modeTable {
		f := a.skus[string(lm.name)+"/"+sku]
		switch {
		case f == nil:
		case stock < 0:
			f.stockSeen = time.Time{}
		case now.After(f.stockSeen):
			f.stock, f.stockSeen = stock, now
		}
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
