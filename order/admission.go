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
// queue only grows, and every waiter that times out costs the holders ZooKeeper's writes; refused
// at the door, a purchase costs nothing of the SKU's: no node, no read, no connection.
//
// The rule: a purchase is refused when its foreseen wait, scaled by how the waits foreseen here
// turned out (skuFlow.scale), is longer than the budget. The foreseen wait rests on what this
// replica measures of the SKU, never on a queue length someone must tune:
//
//   - the queue: the purchases ahead of it here, one turn each (Little's law: the fleet's queue
//     is first come, first served and each replica takes its share, so the purchases ahead here
//     over this replica's rate of ends is the fleet's queue over the fleet's rate). A turn is the
//     moving average of the gaps between ends here while the SKU was busy, and at least their
//     mean over the last budget (skuFlow.paced). The purchase's own turn is waited for too.
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
	// in it and the turn it moves at (fleetqueue.go); ok is false when the mode has no such
	// queue, or it has not been measured. The wait is then foreseen from it (foreseenInFleet).
	fleet func(sku string, mode LockMode) (contenders int, turn time.Duration, ok bool)

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
	// scale corrects the foreseen wait by what the waits turned out to be: the moving average of
	// (time in flight) / (foreseen wait + a turn) over the purchases that found a queue. A
	// purchase spends time beside its turn (its node's create, the hand-off to it), and the
	// replicas' turns interleave unevenly. 1 until measured.
	scale float64
	// stallEnded is when the last stall ended (a gap stallFactor turns long, a holder killed
	// whose node stayed until its session ended); longGaps counts such gaps in a row.
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
func (e *errSKUBusy) retryAfterSeconds() int {
	return max(1, int(math.Ceil(e.retryAfter.Seconds())))
}

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
		f = &skuFlow{scale: 1, lastLeft: -1, fleetErr: newEstimateError()}
		a.skus[sku] = f
	}
	raw := f.foreseen(now, a.budget)
	// Its own turn is waited for too.
	wait := time.Duration(float64(raw+f.turn) * f.scale)
	var fleetWait time.Duration // the wait foreseen from the fleet's queue, when it was
	if a.fleet != nil {
		if contenders, turn, ok := a.fleet(key, mode); ok {
			raw = f.foreseenInFleet(now, a.budget, contenders, turn)
			if raw >= 2*turn { // found a queue: its error is learnt (fleetErr)
				fleetWait = raw + turn
			}
			wait = time.Duration(float64(raw+turn) * f.fleetErr.margin())
		}
	}
	if raw > 0 && a.budget > 0 && wait > a.budget {
		return nil, &errSKUBusy{wait: wait, retryAfter: wait - a.budget}
	}
	if f.inFlight == 0 {
		f.since = now
		f.ends, f.paced = f.ends[:0], 0
	}
	f.inFlight++
	f.units += qty
	return func(end turnEnd) {
		if fleetWait > 0 {
			a.learnFleetError(f, now, fleetWait, end)
		}
		a.leave(sku, f, now, raw, qty, end)
	}, nil
}

// foreseen is the wait of a purchase arriving at now: the purchases ahead of it, one turn each,
// or, when the stock seen within fresh of now cannot last that many turns, the wait for the
// sell-out. A turn that runs long (a holder killed, whose node stays until its session ends; a
// database that stalls) is not counted as a queue: its waiters would be served once it ends,
// within LOCK_TIMEOUT, which still bounds their wait.
func (f *skuFlow) foreseen(now time.Time, fresh time.Duration) time.Duration {
	if f.inFlight == 0 || f.turns == 0 {
		return 0 // nobody ahead, or no turn measured yet: admit, and learn
	}
	// The last turnWindow gaps follow a run of this replica's purchases at the head of the
	// fleet's queue, whose gaps here are the fleet's turns, not this replica's pace: the others'
	// purchases wait behind them. The last budget's turns average a whole queue's worth of the
	// replicas' shares, and bound the turn from below.
	turn := max(f.turn, f.paced)
	queue := time.Duration(f.inFlight) * turn
	if f.stockSeen.IsZero() || now.Sub(f.stockSeen) > fresh {
		return queue
	}
	// The units the fleet sells a turn here: measured, and never fewer than those ahead here
	// ask for a turn (all that this replica knows of when nothing is measured yet).
	perTurn := max(f.drain, float64(f.units)/float64(f.inFlight))
	turnsLeft := int(math.Ceil(float64(max(f.stock, 0)) / perTurn))
	if turnsLeft >= f.inFlight {
		return queue
	}
	return time.Duration(turnsLeft)*turn + f.sellOutWait()
}

// foreseenInFleet is the wait of a purchase arriving at now behind the contenders of the fleet's
// queue, one turn each, or, when the stock seen within fresh of now cannot last that many turns,
// the wait for the sell-out: the turns the stock lasts, a turn whose holder finds it short, and a
// poll that sends the queue away.
func (f *skuFlow) foreseenInFleet(now time.Time, fresh time.Duration, contenders int, turn time.Duration) time.Duration {
	queue := time.Duration(contenders) * turn
	if f.stockSeen.IsZero() || now.Sub(f.stockSeen) > fresh || f.inFlight == 0 {
		return queue
	}
	perTurn := max(1, float64(f.units)/float64(f.inFlight)) // the units a purchase here asks for
	if turnsLeft := int(math.Ceil(float64(max(f.stock, 0)) / perTurn)); turnsLeft < contenders {
		return time.Duration(turnsLeft+1)*turn + soldOutPoll
	}
	return queue
}

// sellOutWait is how long the sell-out takes to reach the purchases queued here once the stock
// is gone: a turn here, whose holder finds the stock short (or leaves it so), and a poll of it
// that sends the queue away (soldout.go).
func (f *skuFlow) sellOutWait() time.Duration { return f.turn + soldOutPoll }

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

// Bounds of skuFlow.scale: a few odd waits must not make the estimate refuse everyone, nor admit
// everyone.
const minScale, maxScale = 0.5, 2.0

func (a *admission) leave(sku string, f *skuFlow, entered time.Time, foreseen time.Duration, qty int64, end turnEnd) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now() // under the lock: ends racing for it must not make a gap run backwards
	f.inFlight--
	f.units -= qty
	if end.left >= 0 {
		f.stock, f.stockSeen = end.left, now
	}
	if !end.turned {
		// Sent away from the queue, or timed out: no turn was served, and the burst of ends
		// when a sold-out product's queue is sent away would read as turns of no length. A
		// purchase that gave up its wait (LOCK_TIMEOUT) waited at least as long as it did:
		// the waits foreseen worst end so, and the scale learns them, raised only (a wait cut
		// short says nothing of how long it would have been), and not while a stall is under
		// way (a holder killed, whose node stays for a session, is no queue).
		stalling := now.Sub(f.since) > max(stallFactor*f.turn, stallFloor)
		if end.timedOut && !stalling && f.foundQueue(entered, foreseen) {
			f.learnScale(now.Sub(entered), foreseen, true)
		}
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
	if !stalled && f.foundQueue(entered, foreseen) {
		f.learnScale(now.Sub(entered), foreseen, false)
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
	f.pace(now, stalled, a.budget)
	if end.left >= 0 {
		// A stock that grew since the last turn here was restocked: no measure of the drain.
		if fell := f.lastLeft - end.left; f.lastLeft >= 0 && fell >= 0 {
			f.drains = min(f.drains+1, turnWindow)
			f.drain += (float64(fell) - f.drain) / float64(f.drains)
		}
		f.lastLeft = end.left
	}
	f.since = now
	if f.inFlight == 0 && len(a.skus) > maxKnownSKUs {
		delete(a.skus, sku) // bounded like the SKUs a replica remembers; relearnt if it comes back
	}
}

// foundQueue says whether a purchase that entered when, foreseen to wait foreseen, says how good
// the estimate is: only one that found a queue of a few turns does; one that found none would
// weigh its own turn's noise, and one that waited through a stall the stall.
func (f *skuFlow) foundQueue(entered time.Time, foreseen time.Duration) bool {
	return f.turn > 0 && foreseen >= 2*f.turn && entered.After(f.stallEnded)
}

// learnScale takes a purchase's time in flight against the wait foreseen for it into the scale;
// atLeast, when its wait was longer still, only if that raises the scale.
func (f *skuFlow) learnScale(inFlight, foreseen time.Duration, atLeast bool) {
	ratio := float64(inFlight) / float64(foreseen+f.turn)
	if atLeast && ratio <= f.scale {
		return
	}
	f.scale = min(maxScale, max(minScale, f.scale+(ratio-f.scale)/turnWindow))
}

// pace takes a turn's end at now into ends and paced: a stall starts them afresh.
func (f *skuFlow) pace(now time.Time, stalled bool, span time.Duration) {
	if stalled {
		f.ends = f.ends[:0]
	}
	f.ends = append(f.ends, now)
	drop := 0
	for drop < len(f.ends) && now.Sub(f.ends[drop]) > span {
		drop++
	}
	f.ends = f.ends[drop:] // a queue: append reallocates (keeping the live ends only) when it must
	f.paced = 0
	if n := len(f.ends); n > turnWindow {
		f.paced = now.Sub(f.ends[0]) / time.Duration(n-1)
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
