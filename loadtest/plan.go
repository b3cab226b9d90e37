package loadtest

import (
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// plan is the schedule of intended send times: vegeta's pacer run on a clock of its own that is
// never late. vegeta's Attacker is not used because it stamps a result when a worker takes the
// tick (Result.Timestamp, in Attacker.hit), so a tick the attack loop or the runtime delayed
// counts from its late start: coordinated omission, when the machine that generates the load is
// busy. Against this plan a late purchase is sent at once and its lateness counts in its latency.
type plan struct {
	pacer vegeta.Pacer
	until time.Duration
	at    time.Duration
	hits  uint64
}

func newPlan(rate int, d time.Duration) *plan {
	return &plan{pacer: vegeta.ConstantPacer{Freq: rate, Per: time.Second}, until: d}
}

// next is the next purchase's intended send time since the start, or false when the plan ends.
func (p *plan) next() (time.Duration, bool) {
	wait, stop := p.pacer.Pace(p.at, p.hits)
	if stop || p.at+max(wait, 0) > p.until {
		return 0, false
	}
	p.at += max(wait, 0)
	p.hits++
	return p.at, true
}

// countPlan is how many purchases the plan sends.
func countPlan(rate int, d time.Duration) int {
	p, n := newPlan(rate, d), 0
	for _, ok := p.next(); ok; _, ok = p.next() {
		n++
	}
	return n
}
