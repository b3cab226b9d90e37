package sale

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
)

// fleetSim drives one admission a replica with a synthetic fleet on a clock of its own: buyers
// of one unit each arrive at a fixed rate, round-robin over the replicas; those admitted join
// one first-come-first-served lock queue, served a turn at a time. A replica suspects the sell-out
// when a turn of its own leaves the stock empty or finds it so; from then on its arrivals are
// answered before they queue (they never reach admission) and, a poll later, its queued
// purchases are sent away, as soldout.go does it. Nothing in it is timed by the machine's clock.
type fleetSim struct {
	replicas int
	rate     int           // buyers a second
	turn     time.Duration // one turn of the lock, fleet-wide (jittered by up to half of it)
	beside   time.Duration // time a purchase spends in flight besides its turn (its node's create, the release)
	stock    int64
	budget   time.Duration
	arrivals time.Duration // buyers come for this long
	// warmTurn, when set, is the turn at the start, which shortens evenly to turn over warmUp (a
	// cold lock path, a server still warming up).
	warmTurn, warmUp time.Duration
	// fleetView: each replica's admission reads the fleet's queue (fleetqueue.go) as ZooKeeper
	// would show it, every queueSamplePeriod at most, when one of its purchases asks.
	fleetView bool
	// closed: phases of closed-loop load besides the arrivals at rate, one after the other, each
	// of clients that send their next purchase think after the last was answered (a phase of no
	// clients is a pause between runs).
	closed []simPhase
	think  time.Duration
	// outageAt, outageFor: ZooKeeper is away for outageFor from outageAt into the run (an
	// election): no turn ends while it is (the holder's turn resumes once it is back), and every
	// reading of the fleet's queue fails.
	outageAt, outageFor time.Duration
	// slow: the run's first turns last these, one each (a lock path and a database gone cold,
	// the key holds of a burst queued for the database's connections).
	slow []time.Duration
	seed uint64 // of the turns' jitter; 0: 41
	// join, when set: an admitted purchase joins the queue a random time under join after it was
	// admitted (its node's create, committed by the ensemble), so that a reading taken between
	// does not see it, and those admitted together join in another order.
	join time.Duration
	// probe, when set, is shown each replica's admission and readings before every event.
	probe func(now time.Time, adm []*admission, readings []*queueReadings)
}

// simPhase is a phase of closed-loop load: clients in flight for span. With ramp, the clients
// start one after another, evenly over it (a load generator's workers dialling their first
// connections); with cold, the first turn the phase begins lasts that long (a lock path and a row
// cold after a pause).
type simPhase struct {
	clients    int
	span       time.Duration
	ramp, cold time.Duration
}

// turnAt is the turn at d into the run.
func (s fleetSim) turnAt(d time.Duration) time.Duration {
	if s.warmTurn == 0 || d >= s.warmUp {
		return s.turn
	}
	return s.warmTurn + time.Duration(float64(s.turn-s.warmTurn)*float64(d)/float64(s.warmUp))
}

type simBuyer struct {
	replica int
	client  int       // its client in a closed-loop run; -1 in an open one
	at      time.Time // its arrival
	leave   func(turnEnd)
	refused bool
	queued  bool // admitted, and in the lock's queue
	joinAt  time.Time
	// behind, for a refused buyer, is the last of the queue it would have joined (nil: none).
	behind   *simBuyer
	answered time.Time
	sold     bool
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

type simResult struct {
	buyers []*simBuyer
	start  time.Time
	// falseCounted is how many refusals the replicas' admissions found false (falseRefusal).
	falseCounted int
}

// falseRefusals is how many refused buyers would have been served within budget by the queue
// they would have joined: its last purchase's turn ended (answered, less the time beside the
// turn) a turn before the budget ran out; and how many were refused.
func (r simResult) falseRefusals(s fleetSim) (wrong, refused int) {
	for _, b := range r.buyers {
		if !b.refused {
			continue
		}
		refused++
		wait := s.turn
		if b.behind != nil {
			wait += b.behind.answered.Add(-s.beside).Sub(b.at)
		}
		if wait <= s.budget {
			wrong++
		}
	}
	return wrong, refused
}

// refusedShare is the share of the buyers who came in [from, to) since the start that were
// refused sku_busy.
func (r simResult) refusedShare(from, to time.Duration) (refused, came int) {
	for _, b := range r.buyers {
		if d := b.at.Sub(r.start); d >= from && d < to {
			came++
			if b.refused {
				refused++
			}
		}
	}
	return refused, came
}

// saleWaits are the waits of the admitted buyers who were sold a unit, arrival to answer.
func (r simResult) saleWaits() []time.Duration {
	var w []time.Duration
	for _, b := range r.buyers {
		if b.sold {
			w = append(w, b.answered.Sub(b.at))
		}
	}
	slices.Sort(w)
	return w
}

func (s fleetSim) run(t *testing.T) simResult {
	t.Helper()
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	now := start
	clock := func() time.Time { return now }
	adm := make([]*admission, s.replicas)
	var res simResult
	for i := range adm {
		adm[i] = newAdmission(s.budget)
		adm[i].now = clock
		adm[i].falseRefusal = func(refusalCheck, time.Duration) { res.falseCounted++ }
	}
	// The fleet's queue as ZooKeeper holds it: its contenders, and its moves (joins and leaves).
	var moves uint32
	readings := make([]*queueReadings, s.replicas)
	for i := range adm {
		readings[i] = &queueReadings{}
		if s.fleetView {
			adm[i].fleet = func(string, LockMode) (queueView, bool) { return readings[i].estimate(now) }
		}
	}
	seed := uint64(41)
	if s.seed != 0 {
		seed = s.seed
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	stock := s.stock
	suspectAt := make([]time.Time, s.replicas) // zero: no suspicion
	var queue []*simBuyer
	var joining []*simBuyer // admitted, to join the queue at their joinAt
	res.start = start
	total := int(s.arrivals.Seconds() * float64(s.rate))
	next := 0 // the next buyer to arrive
	arrival := func(i int) time.Time { return start.Add(time.Duration(i) * time.Second / time.Duration(s.rate)) }
	// A closed-loop run's clients: the time each sends its next purchase (zero: none), and the end
	// of its phase.
	var sends, until []time.Time
	var colds []simPhase // the phases with a cold first turn, their span starting where they do
	phaseAt := start
	for _, ph := range s.closed {
		for c := range ph.clients {
			first := phaseAt.Add(ph.ramp * time.Duration(c) / time.Duration(ph.clients))
			sends, until = append(sends, first), append(until, phaseAt.Add(ph.span))
		}
		if ph.cold > 0 {
			colds = append(colds, simPhase{span: phaseAt.Sub(start), cold: ph.cold})
		}
		phaseAt = phaseAt.Add(ph.span)
	}
	nextSend := func() (client int, at time.Time) {
		client = -1
		for c, t := range sends {
			if !t.IsZero() && (client < 0 || t.Before(at)) {
				client, at = c, t
			}
		}
		return client, at
	}
	answer := func(b *simBuyer, at time.Time) {
		b.answered = at
		if b.client >= 0 {
			if next := at.Add(s.think); next.Before(until[b.client]) {
				sends[b.client] = next
			}
		}
	}
	outageFrom, outageTo := start.Add(s.outageAt), start.Add(s.outageAt+s.outageFor)
	inOutage := func(at time.Time) bool { return s.outageFor > 0 && !at.Before(outageFrom) && at.Before(outageTo) }
	var holder *simBuyer
	var holderEnds time.Time
	slow := s.slow
	end := func(b *simBuyer, e turnEnd) {
		answer(b, now.Add(s.beside))
		// The end is timed when the purchase leaves; the beside time is spent after its turn.
		saved := now
		now = b.answered
		b.leave(e)
		now = saved
	}
	for next < total || holder != nil || len(queue) > 0 || len(joining) > 0 || slices.ContainsFunc(sends, func(t time.Time) bool { return !t.IsZero() }) {
		// The next event: an arrival, the holder's end, a replica's poll sending its queue away.
		tNext := time.Time{}
		pick := func(at time.Time) {
			if tNext.IsZero() || at.Before(tNext) {
				tNext = at
			}
		}
		if next < total {
			pick(arrival(next))
		}
		client, sendAt := nextSend()
		if client >= 0 {
			pick(sendAt)
		}
		if holder != nil {
			pick(holderEnds)
		}
		for r, at := range suspectAt {
			if !at.IsZero() && slices.ContainsFunc(queue, func(b *simBuyer) bool { return b.replica == r }) {
				pick(at.Add(soldOutPoll))
			}
		}
		if holder == nil && len(queue) > 0 {
			pick(now)
		}
		for _, b := range joining {
			pick(b.joinAt)
		}
		now = tNext
		if s.probe != nil {
			s.probe(now, adm, readings)
		}
		if i := slices.IndexFunc(joining, func(b *simBuyer) bool { return !b.joinAt.After(now) }); i >= 0 {
			queue = append(queue, joining[i])
			joining = slices.Delete(joining, i, i+1)
			moves++
			continue
		}
		switch {
		case holder != nil && !holderEnds.After(now):
			b := holder
			holder = nil
			moves++
			if stock >= 1 {
				stock--
				b.sold = true
				end(b, turnEnd{turned: true, left: stock})
				if stock == 0 && suspectAt[b.replica].IsZero() {
					suspectAt[b.replica] = now
				}
			} else {
				end(b, turnEnd{turned: true, left: 0})
				if suspectAt[b.replica].IsZero() {
					suspectAt[b.replica] = now
				}
			}
		case holder == nil && len(queue) > 0 && !queue[0].at.After(now):
			holder, queue = queue[0], queue[1:]
			turn := s.turnAt(now.Sub(start))
			jitter := time.Duration(rng.Int64N(int64(turn))) - turn/2
			holderEnds = now.Add(turn + jitter)
			if len(colds) > 0 && now.Sub(start) >= colds[0].span {
				holderEnds, colds = now.Add(colds[0].cold), colds[1:]
			}
			if s.outageFor > 0 && now.Before(outageTo) && holderEnds.After(outageFrom) {
				holderEnds = holderEnds.Add(outageTo.Sub(later(now, outageFrom))) // no turn ends while ZooKeeper is away
			}
			if len(slow) > 0 {
				holderEnds, slow = now.Add(slow[0]), slow[1:]
			}
		case next < total && !arrival(next).After(now) || client >= 0 && !sendAt.After(now):
			b := &simBuyer{replica: len(res.buyers) % s.replicas, at: now, client: -1}
			if client >= 0 && !sendAt.After(now) {
				b.client, sends[client] = client, time.Time{}
			} else {
				next++
			}
			res.buyers = append(res.buyers, b)
			if !suspectAt[b.replica].IsZero() {
				answer(b, now) // 409 before the queue: admission never sees it
				continue
			}
			if r := readings[b.replica]; s.fleetView && now.Sub(r.lastAt) >= queueSamplePeriod && !now.Before(r.retryAt) {
				contenders := len(queue)
				if holder != nil {
					contenders++
				}
				if inOutage(now) {
					r.fail(now)
				} else {
					r.take(dlock.QueueStat{Contenders: contenders, Moves: moves}, now)
				}
			}
			leave, err := adm[b.replica].enter("SIM", ModeZK, 1, now)
			if err != nil {
				if !isSKUBusy(err) {
					t.Fatalf("enter: %v", err)
				}
				b.refused = true
				if b.behind = holder; len(queue) > 0 {
					b.behind = queue[len(queue)-1]
				}
				answer(b, now)
				continue
			}
			b.leave, b.queued = leave, true
			if s.join > 0 {
				b.joinAt = now.Add(time.Duration(rng.Int64N(int64(s.join))))
				joining = append(joining, b)
				continue
			}
			queue = append(queue, b)
			moves++
		default: // a poll sends away the queued purchases of the replicas that suspect the sell-out
			kept := queue[:0]
			for _, b := range queue {
				if at := suspectAt[b.replica]; !at.IsZero() && !at.Add(soldOutPoll).After(now) {
					answer(b, now)
					b.leave(turnEnd{left: 0})
					moves++
					continue
				}
				kept = append(kept, b)
			}
			queue = kept
		}
	}
	res.buyers = res.buyers[:len(res.buyers):len(res.buyers)]
	return res
}
