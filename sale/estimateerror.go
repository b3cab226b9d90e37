package sale

import (
	"math"
	"time"
)

// estimateError is how the waits admission foresaw from the fleet's queue turned out: the recent
// averages of (time in flight) / (wait foreseen) and of its deviation from that mean. Admission
// refuses a purchase whose foreseen wait times margin is past the budget, so that the budget
// holds for nearly every admitted purchase (estimateDevs mean deviations above the mean error),
// not for half of them; an estimate that proves exact gives nearly the whole budget to the queue.
// A wait that overlapped a disturbance (an election, a lost session, a stall) is not learnt
// (skuFlow.overlapped), and what was learnt fades within a few learntMemory (recent).
type estimateError struct {
	mean, dev recent
}

// estimateWindow is how many purchases the averages weigh at most, like the turns' (turnWindow).
const estimateWindow = turnWindow

// estimateDevs is how many deviations above the mean the margin lies.
const estimateDevs = 4

func newEstimateError() estimateError {
	return estimateError{mean: recent{trusted: estimateTrusted}, dev: recent{trusted: estimateTrusted}}
}

// estimateTrusted is the weight at which the values an estimateError learnt are its averages:
// one, so that the first waits of a busy spell correct the estimate at once. A full window's
// fades below it in about 3.5 learntMemory, and is gone a learntMemory or two later.
const estimateTrusted = 1

// margin is what a foreseen wait is multiplied by before it is held against the budget at now:
// the mean error, but at least 1 (waits that turned out shorter than foreseen, as when the turns
// speed up, are no reason to admit a queue longer than the budget), and the deviation above it;
// at most maxScale, so that a few odd waits do not make admission refuse everyone.
func (e *estimateError) margin(now time.Time) float64 {
	return min(maxScale, max(1, e.mean.at(now, 1))+estimateDevs*e.dev.at(now, 0))
}

// learn takes one purchase's time in flight against the wait foreseen for it, at now; atLeast,
// when it gave up waiting (its wait would have been longer still), only if that raises the mean.
func (e *estimateError) learn(inFlight, foreseen time.Duration, atLeast bool, now time.Time) {
	ratio := float64(inFlight) / float64(foreseen)
	if atLeast && ratio <= e.mean.at(now, 1) {
		return
	}
	e.mean.learn(ratio, now)
	e.dev.learn(math.Abs(ratio-e.mean.at(now, 1)), now)
}

// learntMemory is how fast what admission learnt fades: every value's weight falls by a factor
// of e in it. A disturbance learnt weighs a twentieth of what it did three of them later.
const learntMemory = time.Second

// recent is a moving average of the last estimateWindow values that forgets in time as well as
// over values: each value learnt weighs one at first and fades with learntMemory. Read at a time
// (at), the values learnt make the average as far as they weigh trusted, a prior the rest: so
// an average of old values says little, and a disturbance learnt is forgotten within a few
// seconds however few values come after it. Learnt steadily, it is the moving average.
type recent struct {
	trusted float64   // the weight at which the values learnt are the whole average
	mean    float64   // of the values learnt
	weight  float64   // theirs, as of since: at most estimateWindow
	since   time.Time // when weight was last faded
}

// weightAt is the values' weight at now.
func (r *recent) weightAt(now time.Time) float64 {
	if d := now.Sub(r.since); d > 0 && r.weight > 0 {
		return r.weight * math.Exp(-d.Seconds()/learntMemory.Seconds())
	}
	return r.weight
}

// learn takes the value x, learnt at now.
func (r *recent) learn(x float64, now time.Time) {
	r.weight = min(estimateWindow, r.weightAt(now)+1)
	if now.After(r.since) {
		r.since = now
	}
	r.mean += (x - r.mean) / r.weight
}

// at is the average at now, prior making up what the values learnt do not.
func (r *recent) at(now time.Time, prior float64) float64 {
	return prior + (r.mean-prior)*min(1, r.weightAt(now)/r.trusted)
}
