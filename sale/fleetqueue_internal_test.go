package sale

import (
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
)

// The fleet's queue as readings show it: no estimate until a rate is measured over a span after
// the queue's start (the first span, which measures nothing); the
// rate is the nodes that left (moves less the growth, halved) over the span; a span in which
// none left keeps the rate; a turn is foreseen at the slower of the average and the last span;
// readings older than queueSampleFresh give no estimate; a path made again gives no measure.
func TestFleetQueueReadings(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var r queueReadings
	r.take(dlock.QueueStat{Contenders: 10, Moves: 100}, t0)
	if _, _, ok := estimated(&r, t0); ok {
		t.Fatal("an estimate from one reading")
	}
	r.take(dlock.QueueStat{Contenders: 12, Moves: 150}, t0.Add(100*time.Millisecond)) // shorter than a span
	if _, _, ok := estimated(&r, t0.Add(100*time.Millisecond)); ok {
		t.Fatal("an estimate from a span shorter than queueRateSpan")
	}
	// The first span ends the queue's start, whose cold turns are no pace: 1 left while 9 joined.
	at := t0.Add(queueRateSpan)
	r.take(dlock.QueueStat{Contenders: 18, Moves: 110}, at)
	if _, turn, ok := estimated(&r, at); ok {
		t.Fatalf("an estimate from the queue's start: turn %v", turn)
	}
	// 250 ms: 50 moves, 2 more contenders: 26 joined, 24 left, then 1 more: 100 a second, a
	// turn of 10 ms.
	r.take(dlock.QueueStat{Contenders: 20, Moves: 160}, at.Add(100*time.Millisecond))
	at = at.Add(queueRateSpan)
	r.take(dlock.QueueStat{Contenders: 19, Moves: 161}, at)
	c, turn, ok := estimated(&r, at)
	if !ok || c != 19 || turn != 10*time.Millisecond {
		t.Fatalf("after 25 left in 250 ms: %d contenders, turn %v, ok %v; want 19, 10ms, true", c, turn, ok)
	}
	// A stall: nobody left in a span while 6 joined. The rate stays.
	at = at.Add(queueRateSpan)
	r.take(dlock.QueueStat{Contenders: 25, Moves: 167}, at)
	if _, turn, _ := estimated(&r, at); turn != 10*time.Millisecond {
		t.Fatalf("after a span with none leaving: turn %v, want the 10 ms measured before", turn)
	}
	// A faster span (50 left: 5 ms a turn) is followed gradually, a slower one at once.
	at = at.Add(queueRateSpan)
	r.take(dlock.QueueStat{Contenders: 25, Moves: 267}, at)
	if _, turn, _ := estimated(&r, at); turn <= 5*time.Millisecond || turn >= 10*time.Millisecond {
		t.Fatalf("after a span of 5 ms turns: turn %v, want between 5 and 10 ms", turn)
	}
	at = at.Add(queueRateSpan)
	r.take(dlock.QueueStat{Contenders: 25, Moves: 277}, at) // 5 left: 50 ms a turn
	if _, turn, _ := estimated(&r, at); turn != 50*time.Millisecond {
		t.Fatalf("after a span of 50 ms turns: turn %v, want 50ms at once", turn)
	}
	if _, _, ok := estimated(&r, at.Add(queueSampleFresh+time.Millisecond)); ok {
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
	if _, turn, ok := estimated(&r, t0.Add(39*time.Second)); ok {
		t.Fatalf("a trickle of one buyer every 2 s gave a turn of %v; want no estimate", turn)
	}
}

// estimated is r's estimate at now, as its contenders, its turn and whether it is given.
func estimated(r *queueReadings, now time.Time) (contenders int, turn time.Duration, ok bool) {
	v, ok := r.estimate(now)
	return v.contenders, v.turn, ok
}

// No rate is measured across a reading that failed (an election, a lost session), nor across a
// gap in the readings (nobody asked, and the queue may have idled or stalled unseen): the turn
// stays as measured before, where the first reading after measured the rate over the whole span
// and made the turn many times longer. The failure, and the first good reading after it, are a
// disturbance the view tells of; so is a busy span in which nobody left.
func TestFleetQueueMeasuresNoRateAcrossAFailure(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var r queueReadings
	moves := uint32(0)
	at := t0
	steady := func(spans int) { // 50 queued; 25 leave and 25 join every span: 10 ms turns
		for range spans {
			at = at.Add(queueRateSpan)
			moves += 50
			r.take(dlock.QueueStat{Contenders: 50, Moves: moves}, at)
		}
	}
	r.take(dlock.QueueStat{Contenders: 50, Moves: moves}, at)
	steady(4)
	if _, turn, ok := estimated(&r, at); !ok || turn != 10*time.Millisecond {
		t.Fatalf("steady 10 ms turns: turn %v, ok %v", turn, ok)
	}
	// An election: readings fail for 2 s; the queue moves again for the last 0.2 s of it.
	r.fail(at.Add(queueSamplePeriod))
	at = at.Add(2 * time.Second)
	moves += 40
	r.take(dlock.QueueStat{Contenders: 50, Moves: moves}, at)
	if _, turn, ok := estimated(&r, at); !ok || turn != 10*time.Millisecond {
		t.Fatalf("the first reading after a failure: turn %v, ok %v; want the 10 ms measured before", turn, ok)
	}
	if v, _ := r.estimate(at); !v.disturbed.Equal(at) {
		t.Fatalf("disturbed %v; want the first good reading after the failure, %v", v.disturbed, at)
	}
	steady(1)
	// A gap in the readings: nobody asked for 3 s, in which 20 left and 20 joined.
	at = at.Add(3 * time.Second)
	moves += 40
	r.take(dlock.QueueStat{Contenders: 50, Moves: moves}, at)
	steady(1)
	if _, turn, ok := estimated(&r, at); !ok || turn != 10*time.Millisecond {
		t.Fatalf("after a gap of 3 s in the readings: turn %v, ok %v; want the 10 ms measured before", turn, ok)
	}
	// A busy span that nobody left: the rate stays, and it is a disturbance.
	at = at.Add(queueRateSpan)
	moves += 5
	r.take(dlock.QueueStat{Contenders: 55, Moves: moves}, at)
	if v, _ := r.estimate(at); !v.disturbed.Equal(at) || v.turn != 10*time.Millisecond {
		t.Fatalf("a span nobody left: turn %v, disturbed %v; want 10 ms, %v", v.turn, v.disturbed, at)
	}
}
