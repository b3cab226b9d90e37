package sale

import (
	"context"
	"sync"
	"time"

	"github.com/zkstock/zkstock/dlock"
)

// fleetQueue foresees the wait of a purchase joining a SKU's lock queue in ZooKeeper from the
// fleet's own numbers, read from ZooKeeper (dlock.Client.QueueStat): the contenders the queue
// holds now, and the rate at which nodes leave it. By Little's law a newcomer waits for the
// contenders ahead of it and its own turn, each a turn at that rate. A replica's own view (its
// purchases in flight, the gaps between its own ends) cannot see the other replicas' share of the
// queue, which comes and goes in runs; the queue in ZooKeeper is the whole fleet's.
//
// A purchase never waits for ZooKeeper to be admitted: readings are made in the background, at
// most one per SKU every queueSamplePeriod, when a purchase asks. A SKU's numbers are given only
// while its last reading is fresh (queueSampleFresh) and a rate has been measured; otherwise
// admission falls back on what this replica measures itself.
//
// A rate is measured only over a span in which every reading found the queue busy: nodes leave an
// idle queue as fast as they come, which says how much was asked, not how fast a turn goes. Nor
// is it measured across a reading that failed (an election, a lost session) or a gap between
// readings longer than a span (nobody asked: the queue may have idled, or stalled, unseen). A
// span in which no node left (a holder killed, whose node stays until its session ends; a
// database that stalls) keeps the rate measured before it: a stall is not the queue's pace. A
// failed reading, the first good one after it, and such a span are disturbances (queueView):
// a wait that overlapped one says nothing of how good the estimate is.
type fleetQueue struct {
	stat func(ctx context.Context, sku string) (dlock.QueueStat, error)
	now  func() time.Time

	mu   sync.Mutex
	skus map[string]*queueReadings
}

// queueReadings is one SKU's readings.
type queueReadings struct {
	last    dlock.QueueStat
	lastAt  time.Time // zero: never read
	reading bool      // a reading is under way
	// retryAt: a reading failed (ZooKeeper slow or unreachable); none is begun before this.
	retryAt time.Time
	// base is the reading the next rate is measured from, at least queueRateSpan before it; an
	// empty queue's reading becomes the base at once, and measures nothing.
	base   dlock.QueueStat
	baseAt time.Time
	rate   float64 // nodes leaving per second, a moving average; 0 until measured
	// lastRate is the rate of the last span measured: a turn is foreseen at the slower of the
	// two, so that a queue that slows down is seen at once, and one that speeds up gradually.
	lastRate float64
	// failed: the last reading failed; disturbed is when the last disturbance was seen.
	failed    bool
	disturbed time.Time
	// starting: the readings found the queue empty, or made none for a while, since the last
	// span measured; the next span ends the queue's start (a disturbance), and measures no rate.
	starting bool
	// checks are the refusals not yet judged (judge), oldest first.
	checks []refusalCheck
}

// refusalCheck is a refusal to judge against the queue it would have joined: the contenders the
// reading it was foreseen from showed, and that reading's moves; the refused purchase would have
// been served its own turn after as many nodes left. It was false if that was within the budget
// of when it was refused; judged (wrong), falseRefusal is called, under the readings' lock.
type refusalCheck struct {
	sku          string
	at           time.Time     // when it was refused
	foreseen     time.Duration // the wait it foresaw
	turn, budget time.Duration
	ahead        int    // the contenders of the reading
	moves        uint32 // the reading's moves
	falseRefusal func(c refusalCheck, took time.Duration)
}

// maxRefusalChecks bounds the refusals of a SKU awaiting judgement; those past it are not judged.
const maxRefusalChecks = 1024

// queueView is a SKU's queue as its readings show it: the contenders in it (holders and
// waiters), the turn (the time between two nodes leaving it), and when the readings last saw a
// disturbance (zero: never). A wait that began no later than disturbed overlapped it.
type queueView struct {
	contenders int
	turn       time.Duration
	disturbed  time.Time
	// r and q are where it was read, for watch; q is nil when the caller holds r apart.
	r *queueReadings
	q *fleetQueue
}

// watch has c judged by the readings the view came from, from their next one on.
func (v queueView) watch(c refusalCheck) {
	if v.r == nil {
		return
	}
	if v.q != nil {
		v.q.mu.Lock()
		defer v.q.mu.Unlock()
	}
	c.ahead, c.moves = v.r.last.Contenders, v.r.last.Moves
	if len(v.r.checks) < maxRefusalChecks {
		v.r.checks = append(v.r.checks, c)
	}
}

// judge judges the refusals awaiting it by the reading st at at: one whose queue has been left
// by as many nodes as it held is false when that took, with the refused purchase's own turn,
// within the budget, right otherwise; one not yet passed a budget after it was refused is right.
// Under q.mu.
func (r *queueReadings) judge(st dlock.QueueStat, at time.Time) {
	kept := r.checks[:0]
	for _, c := range r.checks {
		took := at.Sub(c.at)
		moves := int64(st.Moves - c.moves)
		left := (moves - int64(st.Contenders-c.ahead)) / 2
		passed := moves < 1<<31 && left >= int64(c.ahead)
		switch {
		case passed && took+c.turn <= c.budget:
			c.falseRefusal(c, took)
		case passed, took > c.budget, moves >= 1<<31:
		default:
			kept = append(kept, c)
		}
	}
	clear(r.checks[len(kept):])
	r.checks = kept
}

const (
	// queueSamplePeriod: a turn of the hottest lock is a few milliseconds, and a reading is one
	// ZooKeeper read per SKU and replica.
	queueSamplePeriod = 10 * time.Millisecond
	// queueRateSpan is the least time a rate is measured over: a few turns, so that one reading's
	// timing does not make the rate.
	queueRateSpan = 250 * time.Millisecond
	// queueSampleFresh: readings older than this (ZooKeeper unreachable) say nothing of now.
	queueSampleFresh = time.Second
	// queueRateWeight is the weight of a new span in the moving average of the rate.
	queueRateWeight = 0.3
	// queueReadTimeout bounds one reading.
	queueReadTimeout = time.Second
)

func newFleetQueue(stat func(context.Context, string) (dlock.QueueStat, error)) *fleetQueue {
	return &fleetQueue{stat: stat, now: time.Now, skus: map[string]*queueReadings{}}
}

// view returns sku's queue as last read; ok is false when there is no fresh reading with a rate
// measured (the view's disturbed is given even so). It starts a new reading when the last is
// older than queueSamplePeriod.
func (q *fleetQueue) view(sku string) (v queueView, ok bool) {
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.readings(sku)
	if !r.reading && now.Sub(r.lastAt) >= queueSamplePeriod && !now.Before(r.retryAt) {
		r.reading = true
		go q.read(sku, r)
	}
	v, ok = r.estimate(now)
	v.q = q
	return v, ok
}

// viewOf is view for the modes whose purchases queue in ZooKeeper (lockMode.fleetQueue); ok is
// false for the others.
func (q *fleetQueue) viewOf(sku string, mode LockMode) (v queueView, ok bool) {
	if lm, err := modeOf(mode); err != nil || !lm.fleetQueue {
		return queueView{}, false
	}
	return q.view(sku)
}

// readings is sku's readings, made if missing. Under q.mu.
func (q *fleetQueue) readings(sku string) *queueReadings {
	r := q.skus[sku]
	if r == nil {
		if len(q.skus) >= maxKnownSKUs {
			q.dropIdle()
		}
		r = &queueReadings{}
		q.skus[sku] = r
	}
	return r
}

// estimate is the queue as the readings show it at now (see view). Under q.mu.
func (r *queueReadings) estimate(now time.Time) (v queueView, ok bool) {
	v.disturbed, v.r = r.disturbed, r
	if r.rate <= 0 || now.Sub(r.lastAt) > queueSampleFresh {
		return v, false
	}
	v.contenders, v.turn = r.last.Contenders, time.Duration(float64(time.Second)/min(r.rate, r.lastRate))
	return v, true
}

// read makes one reading of sku's queue and takes it into r.
func (q *fleetQueue) read(sku string, r *queueReadings) {
	ctx, cancel := context.WithTimeout(context.Background(), queueReadTimeout)
	st, err := q.stat(ctx, sku)
	cancel()
	at := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	r.reading = false
	if err != nil {
		r.fail(at)
		return
	}
	r.take(st, at)
}

// fail takes a reading that failed at at: a disturbance, across which no rate is measured.
// Under q.mu.
func (r *queueReadings) fail(at time.Time) {
	// A stale reading is not given; a request given up may still be outstanding in ZooKeeper,
	// so the next one waits for as long as this one was given.
	r.retryAt = at.Add(queueReadTimeout)
	r.failed, r.disturbed = true, at
	r.baseAt = time.Time{}
	clear(r.checks) // the queue's moves are not seen now: its refusals are not judged
	r.checks = r.checks[:0]
}

// take takes a reading at at: the queue's size, and, a span after the base, the rate nodes left
// it at. Under q.mu.
func (r *queueReadings) take(st dlock.QueueStat, at time.Time) {
	watched := !r.lastAt.IsZero() && at.Sub(r.lastAt) <= queueRateSpan
	r.last, r.lastAt = st, at
	r.judge(st, at)
	if r.failed {
		// The first good reading after a failure: waits that began before it overlapped the
		// failure's disturbance, however long it lasted.
		r.failed, r.disturbed = false, at
	}
	if r.baseAt.IsZero() || st.Contenders == 0 || !watched {
		// An empty queue begins the next span: no rate is measured across it, nor across a
		// failure (baseAt zero) or a gap in the readings.
		r.base, r.baseAt = st, at
		r.starting = r.starting || st.Contenders == 0 || !watched
		return
	}
	span := at.Sub(r.baseAt)
	if r.starting {
		// The queue's start, until a span is measured: the turns of a lock and a row gone
		// cold, and a burst joining faster than the readings see it. A wait that began in it
		// says how long the start took, not how good the estimate is.
		r.disturbed = at
	}
	if span < queueRateSpan {
		return
	}
	if r.starting {
		// The span that ends the queue's start measures nothing: the queue filled while its
		// first turns went, cold, which is not its pace. The rate measured before, if any,
		// stands.
		r.starting = false
		r.base, r.baseAt = st, at
		return
	}
	// Moves are joins plus leaves; the change in contenders is joins minus leaves. A path made
	// again (its count started over) gives no measure.
	moves := int64(st.Moves - r.base.Moves)
	left := (moves - int64(st.Contenders-r.base.Contenders)) / 2
	switch {
	case left > 0 && left <= moves && moves < 1<<31 && r.base.Contenders > 0:
		rate := float64(left) / span.Seconds()
		r.lastRate = rate
		if r.rate == 0 {
			r.rate = rate
		} else {
			r.rate += queueRateWeight * (rate - r.rate)
		}
	case left <= 0 && moves < 1<<31 && r.base.Contenders > 0:
		r.disturbed = at // a busy queue that nobody left: a stall
	}
	r.base, r.baseAt = st, at
}

// dropIdle forgets the SKUs with no reading under way, bounded like the SKUs a replica
// remembers. Under q.mu.
func (q *fleetQueue) dropIdle() {
	for sku, r := range q.skus {
		if !r.reading {
			delete(q.skus, sku)
		}
	}
}
