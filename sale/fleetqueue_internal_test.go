package sale

import (
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
)

// The fleet's queue as readings show it: no estimate until a rate is measured over a span; the
// rate is the nodes that left (moves less the growth, halved) over the span; a span in which
// none left keeps the rate; a turn is foreseen at the slower of the average and the last span;
// readings older than queueSampleFresh give no estimate; a path made again gives no measure.
func TestFleetQueueReadings(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var r queueReadings
	r.take(dlock.QueueStat{Contenders: 10, Moves: 100}, t0)
	if _, _, ok := r.estimate(t0); ok {
		t.Fatal("an estimate from one reading")
	}
	r.take(dlock.QueueStat{Contenders: 12, Moves: 150}, t0.Add(100*time.Millisecond)) // shorter than a span
	if _, _, ok := r.estimate(t0.Add(100 * time.Millisecond)); ok {
		t.Fatal("an estimate from a span shorter than queueRateSpan")
	}
	// 250 ms: 60 moves, 10 more contenders: 35 joined, 25 left: 100 a second, a turn of 10 ms.
	at := t0.Add(queueRateSpan)
	r.take(dlock.QueueStat{Contenders: 20, Moves: 160}, at)
	c, turn, ok := r.estimate(at)
	if !ok || c != 20 || turn != 10*time.Millisecond {
		t.Fatalf("after 25 left in 250 ms: %d contenders, turn %v, ok %v; want 20, 10ms, true", c, turn, ok)
	}
	// A stall: nobody left in a span while 5 joined. The rate stays.
	at = at.Add(queueRateSpan)
	r.take(dlock.QueueStat{Contenders: 25, Moves: 165}, at)
	if _, turn, _ := r.estimate(at); turn != 10*time.Millisecond {
		t.Fatalf("after a span with none leaving: turn %v, want the 10 ms measured before", turn)
	}
	// A faster span (50 left: 5 ms a turn) is followed gradually, a slower one at once.
	at = at.Add(queueRateSpan)
	r.take(dlock.QueueStat{Contenders: 25, Moves: 265}, at)
	if _, turn, _ := r.estimate(at); turn <= 5*time.Millisecond || turn >= 10*time.Millisecond {
		t.Fatalf("after a span of 5 ms turns: turn %v, want between 5 and 10 ms", turn)
	}
	at = at.Add(queueRateSpan)
	r.take(dlock.QueueStat{Contenders: 25, Moves: 275}, at) // 5 left: 50 ms a turn
	if _, turn, _ := r.estimate(at); turn != 50*time.Millisecond {
		t.Fatalf("after a span of 50 ms turns: turn %v, want 50ms at once", turn)
	}
	if _, _, ok := r.estimate(at.Add(queueSampleFresh + time.Millisecond)); ok {
		t.Fatal("an estimate from a reading older than queueSampleFresh")
	}
	// The path made again: its moves start over. No measure, no harm.
	before := r.rate
	r.take(dlock.QueueStat{Contenders: 1, Moves: 1}, at.Add(queueRateSpan))
	if r.rate != before {
		t.Fatalf("a path made again changed the rate from %v to %v", before, r.rate)
	}
}

// A queue that empties between purchases moves as fast as purchases come: no rate is measured over
// a span with an empty reading, and a trickle leaves no estimate, so that a burst after it is not
// refused for turns that were only the gaps between buyers.
func TestFleetQueueIdleSpansMeasureNothing(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var r queueReadings
	moves := uint32(0)
	for i := range 20 { // one buyer every 2 s: read with it alone queued, then empty
		at := t0.Add(time.Duration(i) * 2 * time.Second)
		moves++
		r.take(dlock.QueueStat{Contenders: 1, Moves: moves}, at)
		moves++
		r.take(dlock.QueueStat{Contenders: 0, Moves: moves}, at.Add(time.Second))
	}
	if _, turn, ok := r.estimate(t0.Add(39 * time.Second)); ok {
		t.Fatalf("a trickle of one buyer every 2 s gave a turn of %v; want no estimate", turn)
	}
}
