package sale

import (
	"math"
	"time"
)

// estimateError is how the waits admission foresaw from the fleet's queue turned out: the moving
// averages of (time in flight) / (wait foreseen) and of its deviation from that mean. Admission
// refuses a purchase whose foreseen wait times margin is past the budget, so that the budget
// holds for nearly every admitted purchase (estimateDevs mean deviations above the mean error),
// not for half of them; an estimate that proves exact gives nearly the whole budget to the queue.
type estimateError struct {
	mean, dev float64
	n         int
}

// estimateWindow is how many purchases the averages weigh, like the turns' (turnWindow).
const estimateWindow = turnWindow

// estimateDevs is how many deviations above the mean the margin lies.
const estimateDevs = 4

func newEstimateError() estimateError { return estimateError{mean: 1} }

// margin is what a foreseen wait is multiplied by before it is held against the budget: the mean
// error, but at least 1 (waits that turned out shorter than foreseen, as when the turns speed up,
// are no reason to admit a queue longer than the budget), and the deviation above it; at most
// maxScale, so that a few odd waits do not make admission refuse everyone.
func (e *estimateError) margin() float64 {
	return min(maxScale, max(1, e.mean)+estimateDevs*e.dev)
}

// learn takes one purchase's time in flight against the wait foreseen for it; atLeast, when it
// gave up waiting (its wait would have been longer still), only if that raises the mean.
func (e *estimateError) learn(inFlight, foreseen time.Duration, atLeast bool) {
	ratio := float64(inFlight) / float64(foreseen)
	if atLeast && ratio <= e.mean {
		return
	}
	e.n = min(e.n+1, estimateWindow)
	e.mean += (ratio - e.mean) / float64(e.n)
	e.dev += (math.Abs(ratio-e.mean) - e.dev) / float64(e.n)
}

// learnFleetError takes how a purchase admitted on a wait foreseen from the fleet's queue ended:
// one served a turn, or one that gave up its wait (LOCK_TIMEOUT). One sent away by the sell-out
// says nothing of the queue.
func (a *admission) learnFleetError(f *skuFlow, entered time.Time, foreseen time.Duration, end turnEnd) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if end.turned || end.timedOut {
		f.fleetErr.learn(a.now().Sub(entered), foreseen, end.timedOut)
	}
}
