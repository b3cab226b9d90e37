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
