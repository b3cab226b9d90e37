package sale

import (
	"testing"
	"time"
)

// What the estimate error learnt fades in time, however few waits come after it: 32 waits three
// times as long as foreseen push the margin to its cap, and six seconds later, with no wait
// learnt since (a replica that refuses every buyer learns none), it is back under 1.2, where it
// stayed at the cap for ever. Exact waits learnt steadily, one every 8 ms, bring it back within
// two seconds (the window's 32 waits are learnt several times over: the deviation lags the
// mean); and a first wait counts at once.
func TestEstimateErrorForgetsInSeconds(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	disturbed := func() (estimateError, time.Time) {
		e := newEstimateError()
		at := t0
		for range estimateWindow {
			at = at.Add(time.Millisecond)
			e.learn(3*time.Second, time.Second, false, at)
		}
		return e, at
	}
	e, at := disturbed()
	if m := e.margin(at); m != maxScale {
		t.Fatalf("margin %.2f after %d waits three times as long as foreseen; want the cap, %v", m, estimateWindow, maxScale)
	}
	if m := e.margin(at.Add(6 * time.Second)); m >= 1.2 {
		t.Errorf("margin %.2f 6 s after the last wait learnt; want under 1.2", m)
	}
	e, at = disturbed()
	for range 250 {
		at = at.Add(8 * time.Millisecond)
		e.learn(time.Second, time.Second, false, at)
	}
	if m := e.margin(at); m >= 1.2 {
		t.Errorf("margin %.2f after two seconds of exact waits; want under 1.2", m)
	}
	e = newEstimateError()
	e.learn(1500*time.Millisecond, time.Second, false, t0)
	if m := e.margin(t0); m < 1.5 {
		t.Errorf("margin %.2f after a first wait 1.5 times as long as foreseen; want at least 1.5", m)
	}
}
