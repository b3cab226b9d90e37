package sale

import (
	"testing"
	"time"
)

// flowAtSellOut is a replica's flow of a SKU 3 s into a flash sale, on a fake clock: 100 buyers
// came at once, 30 of them have had their turns, 100 ms apart, each turn here seeing the stock
// 3 units lower (the fleet's other replicas sell between them), and the last left left.
func flowAtSellOut(t *testing.T, budget time.Duration, left int64) (a *admission, now time.Time) {
	t.Helper()
	now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	a = newAdmission(budget)
	a.now = func() time.Time { return now }
	var leaves []func(turnEnd)
	for range 100 {
		leave, err := a.enter("SALE", ModeZK, 1, now)
		if err != nil {
			t.Fatalf("the first buyers, before any turn: %v", err)
		}
		leaves = append(leaves, leave)
	}
	for i, leave := range leaves[:30] {
		now = now.Add(100 * time.Millisecond)
		leave(turnEnd{turned: true, left: left + int64(3*(29-i))})
	}
	return a, now
}

// A buyer behind more queued demand than the stock left is answered by the sell-out, not by the
// whole queue: 70 ahead at 100 ms a turn is 7 s, past a 2.5 s budget, but the 10 units left last
// 4 turns here (3 sold a turn), and the sell-out reaches the queue a turn and a poll later.
func TestAdmissionForeseesTheSellOut(t *testing.T) {
	a, now := flowAtSellOut(t, 2500*time.Millisecond, 10)
	if _, err := a.enter("SALE", ModeZK, 1, now); err != nil {
		t.Fatalf("a buyer behind 70 purchases of 1 unit with 10 units left: %v; the sell-out answers it within about 0.5 s", err)
	}
}

// Units that exist are waited for: with 1,000 units left the 70 ahead are all served, 7 s, and a
// buyer behind them is refused. So is one behind a queue the stock outlasts once its stock is no
// longer fresh: the stock seen here is trusted for a budget.
func TestAdmissionRefusesAWaitPastTheBudgetForUnitsThatExist(t *testing.T) {
	a, now := flowAtSellOut(t, 2500*time.Millisecond, 1000)
	_, err := a.enter("SALE", ModeZK, 1, now)
	if busy, ok := asSKUBusy(err); !ok || busy.wait < 6*time.Second {
		t.Fatalf("a buyer behind 70 turns of 100 ms, 1,000 units left: %v; want sku_busy foreseeing about 7 s", err)
	}
	a, now = flowAtSellOut(t, 2500*time.Millisecond, 10)
	if _, err := a.enter("SALE", ModeZK, 1, now.Add(2600*time.Millisecond)); !isSKUBusy(err) {
		t.Fatalf("a buyer 2.6 s after the stock was last seen (budget 2.5 s): %v; want sku_busy", err)
	}
	// A restock here forgets the stock: the queue is waited for again.
	a, now = flowAtSellOut(t, 2500*time.Millisecond, 10)
	a.noteStock("SALE", -1, now)
	if _, err := a.enter("SALE", ModeZK, 1, now); !isSKUBusy(err) {
		t.Fatalf("a buyer behind 70 turns after a restock here: %v; want sku_busy", err)
	}
}

// The sale's first second, as issue 41 measured it (1,000 buyers a second at three replicas, 100
// units, turns of 8 ms): the queue grows to hundreds while the units sell in 0.8 s. A buyer is
// refused only if it would wait past the budget; those behind the sell-out are answered by it
// within a second, and were refused: 448 of the first second's 1,000 before admission foresaw
// the sell-out. Under 1% may be.
func TestAdmissionFlashSaleFirstSecond(t *testing.T) {
	budget := 2500 * time.Millisecond
	r := fleetSim{replicas: 3, rate: 1000, turn: 8 * time.Millisecond, stock: 100, budget: budget, arrivals: 2 * time.Second}.run(t)
	refused, came := r.refusedShare(0, time.Second)
	if sold := len(r.saleWaits()); sold != 100 {
		t.Fatalf("%d sold of 100 units", sold)
	}
	if refused*100 >= came {
		t.Errorf("%d of the first second's %d buyers refused sku_busy; want under 1%%", refused, came)
	}
	for _, b := range r.buyers {
		if w := b.answered.Sub(b.at); b.queued && w > budget {
			t.Errorf("a buyer admitted at %v answered after %v, past the budget", b.at.Sub(r.start), w)
		}
	}
}

// With ample stock at 1,000 buyers a second (eight times the lock's capacity), the buyers admitted
// are served about within the budget, and the lock never idles. Each replica foresees from its own
// turns; a run of its purchases at the head of the fleet's queue made its recent turns the
// fleet's, and the waits drifted to p99 3.50 s, max 3.54 s, for a 2.5 s budget, as the issue
// measured (p99 5.0 s); foreseen from the turns of the last budget, p99 2.69 s.
func TestAdmissionAmpleStockWaitsWithinTheBudget(t *testing.T) {
	budget := 2500 * time.Millisecond
	turn := 8 * time.Millisecond
	r := fleetSim{replicas: 3, rate: 1000, turn: turn, stock: 1_000_000_000, budget: budget, arrivals: 10 * time.Second}.run(t)
	w := r.saleWaits()
	p99, worst := w[len(w)*99/100], w[len(w)-1]
	t.Logf("%d sold, wait p50 %v p99 %v max %v", len(w), w[len(w)/2], p99, worst)
	if limit := budget + budget/10; p99 > limit {
		t.Errorf("admitted buyers' wait p99 %v, past the budget %v by more than a tenth", p99, budget)
	}
	sold := 0
	for _, b := range r.buyers {
		if b.sold && b.answered.Sub(r.start) <= 10*time.Second {
			sold++
		}
	}
	if capacity := int(10 * time.Second / turn); sold < capacity*9/10 {
		t.Errorf("%d sold in 10 s; the lock sells %d in that time: it idled while buyers were refused", sold, capacity)
	}
}

// A purchase that gave up its wait after LOCK_TIMEOUT is the worst estimate there is, and the
// scale learns it: ten purchases foreseen 0.3 s that waited 5 s for nothing make a newcomer
// foreseen twice as long, where their waits, not being turns, taught it nothing and it was
// admitted to a queue that had just made ten buyers wait 5 s.
func TestAdmissionLearnsWaitsGivenUp(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	a := newAdmission(400 * time.Millisecond)
	a.now = func() time.Time { return now }
	var fillers, victims []func(turnEnd)
	enter := func(into *[]func(turnEnd)) {
		t.Helper()
		leave, err := a.enter("GAVEUP", ModeZK, 1, now)
		if err != nil {
			t.Fatalf("at %v, %d in flight: %v", now, len(fillers)+len(victims), err)
		}
		*into = append(*into, leave)
	}
	turn := func() { // a turn of 10 ms ends the oldest filler, and a new one comes
		now = now.Add(10 * time.Millisecond)
		fillers[0](turned)
		fillers = fillers[1:]
		enter(&fillers)
	}
	for range 20 {
		enter(&fillers)
	}
	for range 50 {
		turn()
	}
	for range 10 {
		enter(&victims)
	}
	for range 500 { // 5 s of turns; the victims wait behind a queue that never reaches them
		turn()
	}
	for _, leave := range victims {
		leave(turnEnd{timedOut: true, left: -1})
	}
	_, err := a.enter("GAVEUP", ModeZK, 1, now)
	if !isSKUBusy(err) {
		a.mu.Lock()
		scale := a.skus["zk/GAVEUP"].scaleAt(now)
		a.mu.Unlock()
		t.Fatalf("a newcomer behind 20 turns of 10 ms right after 10 purchases foreseen 0.3 s gave up after 5 s: %v (scale %.2f); want sku_busy (budget 0.4 s)", err, scale)
	}
}

// TestAdmissionAmpleStockWarmingUp: ample stock at 1,000 buyers a second, and turns that start at
// 30 ms and shorten to 9 ms over the first two seconds, as a cold ZooKeeper and MariaDB warm up
// (measured so at the start of make flash-sale's runs). Each replica's own turns and their
// corrections lag behind such a change (p99 3.36 s); the fleet's queue, read from ZooKeeper, does
// not. Admitted buyers are served within the budget and the estimate's error (a twentieth), and
// the lock does not idle once warm.
func TestAdmissionAmpleStockWarmingUp(t *testing.T) {
	budget := 2500 * time.Millisecond
	limit := budget + budget/20
	for _, fleetView := range []bool{false, true} {
		r := fleetSim{replicas: 3, rate: 1000, turn: 9 * time.Millisecond, warmTurn: 30 * time.Millisecond, warmUp: 2 * time.Second,
			stock: 1_000_000_000, budget: budget, arrivals: 10 * time.Second, fleetView: fleetView}.run(t)
		w := r.saleWaits()
		p99 := w[len(w)*99/100]
		t.Logf("fleet view %v: %d sold, wait p50 %v p99 %v max %v", fleetView, len(w), w[len(w)/2], p99, w[len(w)-1])
		if !fleetView {
			if p99 <= limit {
				t.Errorf("a replica's own view: p99 %v within %v; this test no longer tells the views apart", p99, limit)
			}
			continue
		}
		if p99 > limit {
			t.Errorf("admitted buyers' wait p99 %v, past the budget %v and a twentieth", p99, budget)
		}
		sold := 0
		for _, b := range r.buyers {
			if b.sold && b.answered.Sub(r.start) <= 10*time.Second {
				sold++
			}
		}
		if capacity := int(8 * time.Second / (9 * time.Millisecond)); sold < capacity {
			t.Errorf("%d sold in 10 s; the lock sells over %d in that time once warm: it idled while buyers were refused", sold, capacity)
		}
	}
}

// A ZooKeeper election under a closed-loop load of 50 buyers in flight (turns of 8 ms: a wait of
// about 0.4 s, a sixth of the budget), with a trickle of other buyers whose readings of the
// fleet's queue fail while it lasts: no turn ends for 1.5 s. Every buyer is served within the
// budget, so none is refused; and once the election is over the estimate's margin is what it was,
// not learnt from the waits that sat through it. Before, the first reading after the election
// measured the rate over it, so that the turn looked a hundred times longer and every buyer was
// refused for a span; and the waits that overlapped it pushed the margin to its cap.
func TestAdmissionForgetsAnElection(t *testing.T) {
	budget := 2500 * time.Millisecond
	outageAt, outageFor := 3*time.Second, 1500*time.Millisecond
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	// Each replica's margin just before the election, and a second after it.
	probeAt := []time.Time{start.Add(outageAt - time.Millisecond), start.Add(outageAt + outageFor + time.Second)}
	margins := make([][]float64, len(probeAt))
	probe := func(now time.Time, adm []*admission, _ []*queueReadings) {
		p := len(margins) - len(probeAt)
		if len(probeAt) == 0 || now.Before(probeAt[0]) {
			return
		}
		probeAt = probeAt[1:]
		for _, a := range adm {
			margins[p] = append(margins[p], a.skus["zk/SIM"].fleetErr.margin(now))
		}
	}
	r := fleetSim{replicas: 3, rate: 20, arrivals: 8 * time.Second, turn: 8 * time.Millisecond, stock: 1_000_000_000, budget: budget,
		fleetView: true, think: time.Millisecond, closed: []simPhase{{clients: 50, span: 8 * time.Second}},
		outageAt: outageAt, outageFor: outageFor, probe: probe}.run(t)
	for _, b := range r.buyers {
		if b.refused {
			refused, came := r.refusedShare(0, 8*time.Second)
			t.Errorf("%d of %d buyers refused sku_busy, the first %v into the run (the election at %v for %v); each would have waited well within the budget",
				refused, came, b.at.Sub(r.start), outageAt, outageFor)
			break
		}
	}
	t.Logf("margins before the election %.2f, a second after it %.2f", margins[0], margins[1])
	for i, after := range margins[1] {
		if before := margins[0][i]; after >= 1.2 && after > before+0.05 {
			t.Errorf("replica %d: margin %.2f a second after the election, %.2f before it; want under 1.2, or as before it", i, after, before)
		}
	}
}

// A closed-loop run of 50 buyers in flight right after a burst of 250 in flight (a wait of about
// 2 s) is refused nothing: every one of its buyers waits about 0.4 s. The run begins the pause
// after the burst's last answer; what the burst left (the last reading of the fleet's queue, with
// hundreds in it, the rate measured across the pause, the margin) must not refuse it.
func TestAdmissionClosedLoopAfterABurst(t *testing.T) {
	budget := 2500 * time.Millisecond
	for _, pause := range []time.Duration{500 * time.Millisecond, 2 * time.Second, 10 * time.Second} {
		// The burst's clients stop at 3 s; the queue they left takes about 2 s more.
		drained := 3*time.Second + 2500*time.Millisecond
		r := fleetSim{replicas: 3, turn: 8 * time.Millisecond, stock: 1_000_000_000, budget: budget, fleetView: true,
			think: time.Millisecond, closed: []simPhase{{clients: 250, span: 3 * time.Second}, {span: drained - 3*time.Second + pause}, {clients: 50, span: 5 * time.Second}}}.run(t)
		from := drained + pause
		if refused, came := r.refusedShare(from, from+5*time.Second); refused > 0 {
			t.Errorf("a run %v after the burst's queue drained: %d of its %d purchases refused sku_busy; want none (50 in flight wait about 0.4 s)", pause, refused, came)
		}
	}
}

// Each refusal foreseen from the fleet's queue is judged against that queue: found false (its
// buyer would have been served within the budget) when the readings see as many nodes leave it
// as it held, a turn before the budget is out. At 1,000 buyers a second for the lock's 125 the
// queue is kept about a budget long, and many refusals are at its edge: some are found false,
// never more than the simulation's own count of them (the readings see a queue pass later than
// it did, if anything). A closed-loop run of 50 in flight is refused nothing, and nothing is
// counted false.
func TestAdmissionCountsFalseRefusals(t *testing.T) {
	budget := 2500 * time.Millisecond
	s := fleetSim{replicas: 3, rate: 1000, turn: 8 * time.Millisecond, stock: 1_000_000_000, budget: budget, arrivals: 10 * time.Second, fleetView: true}
	r := s.run(t)
	wrong, refused := r.falseRefusals(s)
	t.Logf("at 1,000 buyers a second: %d refused, %d of them false, %d counted false", refused, wrong, r.falseCounted)
	if r.falseCounted == 0 || r.falseCounted > wrong {
		t.Errorf("%d refusals counted false of %d refused, %d false; want some, and no more than are", r.falseCounted, refused, wrong)
	}
	s = fleetSim{replicas: 3, turn: 8 * time.Millisecond, stock: 1_000_000_000, budget: budget, fleetView: true, think: time.Millisecond,
		closed: []simPhase{{clients: 50, span: 5 * time.Second}}}
	r = s.run(t)
	if wrong, refused := r.falseRefusals(s); refused > 0 || r.falseCounted > 0 {
		t.Errorf("50 in flight: %d refused, %d false, %d counted false; want none", refused, wrong, r.falseCounted)
	}
}

// The README's loadtest, run after run on the compose stack: each run's 50 clients start within
// 0.1 s of each other, after a pause (the lock-off run, the resets); the run's first turn is slow
// (100 ms, the others about 11 ms); and a purchase joins the queue up to 60 ms after it was
// admitted (its node's create, committed by the ensemble). The purchases admitted while the queue
// fills are foreseen from readings that have not seen those who join ahead of them, and wait
// several times what was foreseen: that says how late the readings were, not how good the turn
// is, and the margin must not learn it (on the stack it stood at its cap, 2, through every run
// after the first; a slow first span then refused a run). 50 in flight wait about 0.6 s, a
// quarter of the budget: no run is refused anything.
func TestAdmissionReadmeLoadtestRunsInARow(t *testing.T) {
	budget := 2500 * time.Millisecond
	const runs, run, pause = 10, 1500 * time.Millisecond, 3 * time.Second
	var phases []simPhase
	for range runs {
		phases = append(phases, simPhase{clients: 50, span: run, ramp: 100 * time.Millisecond, cold: 100 * time.Millisecond},
			simPhase{span: pause})
	}
	var worst float64 // the largest margin a replica held against the budget
	s := fleetSim{replicas: 3, turn: 11 * time.Millisecond, beside: 2 * time.Millisecond, stock: 1_000_000_000, budget: budget,
		fleetView: true, think: time.Millisecond, closed: phases, join: 60 * time.Millisecond,
		probe: func(now time.Time, adm []*admission, _ []*queueReadings) {
			for _, a := range adm {
				if f := a.skus[string(ModeZK)+"/SIM"]; f != nil {
					worst = max(worst, f.fleetErr.margin(now))
				}
			}
		}}
	r := s.run(t)
	for i := range runs {
		from := time.Duration(i) * (run + pause)
		if n, came := r.refusedShare(from, from+run); n > 0 {
			t.Errorf("run %d: %d of %d purchases refused sku_busy; want none (50 in flight wait about 0.6 s)", i+1, n, came)
		}
	}
	if worst > 1.5 {
		t.Errorf("a margin of %.2f was learnt; want at most 1.5 (the turns are as foreseen, within their jitter)", worst)
	}
}

// The fault suite's sustained load: 200 clients on 3 replicas start within 0.3 s, turns of 11 ms
// once warm, a budget of 15 s (LOCK_TIMEOUT 30 s): a wait of about 2.2 s. The first turns are
// slow (about 100 ms: a cold lock path, and the key holds of the 200 purchases queued for the
// database's connections), so that the readings of the queue's start saw 183 join while 3 left
// in 0.31 s. That is no pace: foreseen so, 200 turns were 20 s, and the buyers arriving next
// were refused (16 of 5,000 in one run of the suite, 10 in another, each judged false). Nobody
// is refused.
func TestAdmissionTheQueuesStartIsNotItsPace(t *testing.T) {
	budget := 15 * time.Second
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		s := fleetSim{replicas: 3, turn: 11 * time.Millisecond, beside: 2 * time.Millisecond, stock: 1_000_000_000, budget: budget,
			fleetView: true, think: time.Millisecond, closed: []simPhase{{clients: 200, span: 4 * time.Second, ramp: 300 * time.Millisecond}},
			slow: []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}, join: 20 * time.Millisecond, seed: seed}
		var worst time.Duration
		s.probe = func(now time.Time, _ []*admission, rs []*queueReadings) {
			for _, q := range rs {
				if v, ok := q.estimate(now); ok {
					worst = max(worst, v.turn)
				}
			}
		}
		r := s.run(t)
		if wrong, refused := r.falseRefusals(s); refused > 0 {
			t.Errorf("seed %d: %d refused, %d of them false (turns foreseen up to %v); want none (200 in flight wait about 2.2 s, the budget is 15 s)",
				seed, refused, wrong, worst)
		}
	}
}
