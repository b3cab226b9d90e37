package sale

import (
	"math"
	"time"
)

// How admission learns a SKU's flow from the ends of its turns here (admission.go).

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

// sellOutWait is how long the sell-out takes to reach the purchases queued here once the stock
// is gone: a turn here, whose holder finds the stock short (or leaves it so), and a poll of it
// that sends the queue away (soldout.go).
func (f *skuFlow) sellOutWait() time.Duration { return f.turn + soldOutPoll }

// Bounds of skuFlow.scale: a few odd waits must not make the estimate refuse everyone, nor admit
// everyone.
const minScale, maxScale = 0.5, 2.0

// scaleAt is the scale at now: 1 until measured, and again once what was measured has faded.
func (f *skuFlow) scaleAt(now time.Time) float64 {
	return min(maxScale, max(minScale, f.scale.at(now, 1)))
}

// flowKey names a flow: its SKU and mode, and its key in admission.skus.
type flowKey struct {
	sku  string
	mode LockMode
	key  string
}

// waitsForeseen are the waits foreseen for a purchase: from this replica's own measures, and
// from the fleet's queue when it found one there (0 otherwise).
type waitsForeseen struct{ own, fleet time.Duration }

func (a *admission) leave(k flowKey, f *skuFlow, entered time.Time, foreseen waitsForeseen, qty int64, end turnEnd) {
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
		// the waits foreseen worst end so, and the scale and the margin learn them, raised
		// only (a wait cut short says nothing of how long it would have been), and not while a
		// stall is under way (a holder killed, whose node stays for a session, is no queue).
		stalling := now.Sub(f.since) > max(stallFactor*f.turn, stallFloor)
		if end.timedOut && !stalling && !a.overlapped(k, f, entered) {
			f.learnWait(now.Sub(entered), foreseen, true, now)
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
	if !stalled && !a.overlapped(k, f, entered) {
		f.learnWait(now.Sub(entered), foreseen, false, now)
	}
	if f.turns == 0 {
		// The first end after a cold start ended a time in which everyone then in flight was
		// served side by side (db-cas, none) or queued (the locks): it is shared out among
		// them, which underestimates a queue's turn rather than foreseeing a whole cold first
		// request per purchase ahead; the next ends correct it.
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
		delete(a.skus, k.key) // bounded like the SKUs a replica remembers; relearnt if it comes back
	}
}

// overlapped says whether a wait that began at entered overlapped a disturbance: a stall of the
// ends here that has ended since (stallEnded), or one the readings of the fleet's queue saw (a
// failed reading, a span in which nobody left it). Such a wait says how long the disturbance
// was, not how good the estimate is. Under a.mu.
func (a *admission) overlapped(k flowKey, f *skuFlow, entered time.Time) bool {
	if !entered.After(f.stallEnded) {
		return true
	}
	if a.fleet == nil {
		return false
	}
	v, _ := a.fleet(k.sku, k.mode)
	return !v.disturbed.IsZero() && !entered.After(v.disturbed)
}

// learnWait takes a purchase's time in flight, at now, against the waits foreseen for it: into
// the scale when it found a queue here (foundQueue), into the fleet's estimate error when it
// found one there. atLeast: it gave up waiting, and its wait would have been longer still.
func (f *skuFlow) learnWait(inFlight time.Duration, foreseen waitsForeseen, atLeast bool, now time.Time) {
	if f.foundQueue(foreseen.own) {
		f.learnScale(inFlight, foreseen.own, atLeast, now)
	}
	if foreseen.fleet > 0 {
		f.fleetErr.learn(inFlight, foreseen.fleet, atLeast, now)
	}
}

// foundQueue says whether a purchase foreseen to wait foreseen here says how good the estimate
// is: only one that found a queue of a few turns does; one that found none would weigh its own
// turn's noise (and one that waited through a stall the stall: overlapped).
func (f *skuFlow) foundQueue(foreseen time.Duration) bool {
	return f.turn > 0 && foreseen >= 2*f.turn
}

// learnScale takes a purchase's time in flight against the wait foreseen for it into the scale,
// at now; atLeast, when its wait was longer still, only if that raises the scale.
func (f *skuFlow) learnScale(inFlight, foreseen time.Duration, atLeast bool, now time.Time) {
	ratio := float64(inFlight) / float64(foreseen+f.turn)
	if atLeast && ratio <= f.scaleAt(now) {
		return
	}
	f.scale.learn(ratio, now)
	f.scale.mean = min(maxScale, max(minScale, f.scale.mean))
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

// foreseenInFleet is the wait of a purchase arriving at now behind the contenders of the fleet's
// queue, one turn each, or, when the stock seen within fresh of now cannot last that
// many turns, the wait for the sell-out: the turns the stock lasts, a turn whose holder finds it
// short, and a poll that sends the queue away. A turn sells the units the purchases here ask for
// on average, or one with none in flight here (a sell-out that just sent them all away: the
// stock seen, 0, lasts no turn whatever a turn sells).
func (f *skuFlow) foreseenInFleet(now time.Time, fresh time.Duration, contenders int, turn time.Duration) time.Duration {
	queue := time.Duration(contenders) * turn
	if f.stockSeen.IsZero() || now.Sub(f.stockSeen) > fresh {
		return queue
	}
	perTurn := 1.0
	if f.inFlight > 0 {
		perTurn = max(1, float64(f.units)/float64(f.inFlight))
	}
	if turnsLeft := int(math.Ceil(float64(max(f.stock, 0)) / perTurn)); turnsLeft < contenders {
		return time.Duration(turnsLeft+1)*turn + soldOutPoll
	}
	return queue
}
