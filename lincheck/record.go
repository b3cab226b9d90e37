package lincheck

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// Config says what to record.
type Config struct {
	Replicas   []string // base URLs; a client goes round-robin over them
	AdminToken string   // bearer token of the admin API (reset, lock mode)
	SKUs       [2]string
	Stock      int64 // each SKU's stock, reset before the history
	MaxQty     int64 // a purchase, and each item of a cart, asks for 1 to MaxQty units
	Clients    int
	// Duration of the history; 0 records until Stop.
	Duration time.Duration
	// MaxOps bounds the operations started, so that the check stays fast.
	MaxOps int
	// Pause between a client's operations.
	Pause time.Duration
	// Mode, if set, is the lock mode the fleet is switched to before the history.
	Mode string
	// Switches are lock modes the fleet is switched to, one after another, during the history,
	// evenly spaced over Duration (the history lasts until the last is made), each through one replica drawn at random (a switch is the
	// fleet's, whichever replica is asked).
	Switches []string
	// Disrupt, if set, runs right after each switch is asked for (and while it may still wait for
	// the fleet): say, a replica killed and started again. What it returns is noted beside the
	// switch in the visualization; an error ends the switching.
	Disrupt func(ctx context.Context, step int) (string, error)
	// RequestTimeout bounds one request; a request that times out is of unknown outcome.
	RequestTimeout time.Duration
	// Seed makes the clients' choices reproducible (the service's timing is not).
	Seed uint64
	// HTTPClient, if set, is used instead of one made from RequestTimeout.
	HTTPClient *http.Client
	// KeepUnknown leaves operations of unknown outcome as they are. By default each is sent once
	// more with the same key (or order) after the history: answered as a replay, it had taken
	// effect (Applied); answered as new, or out_of_stock, it had not by then, and no operation of
	// the history can have seen it, so it is left out. This only narrows what the model allows,
	// so it cannot make a history pass that would fail without it; it makes the check fast
	// when many outcomes are unknown.
	KeepUnknown bool
	// ResolveByKey resolves an operation of unknown outcome by looking it up instead of sending it
	// again: a purchase or cart by its key (GET /v1/orders?request_id=KEY; a cart's first order
	// carries the cart's key), a cancellation by its order (GET /v1/orders/ID, cancelled_at). Found,
	// it took effect (Applied); not found, it had not, and never will if nothing is left in flight
	// that could still commit it: call Halt, heal every fault and wait out the service's commit
	// bound before Stop. A look-up changes nothing, so the stock read after the history is the
	// history's own.
	ResolveByKey bool
	// Retries makes the clients retry as people write them: a change whose answer promises it
	// nothing (no answer, outcome_unknown, request_in_progress: internal/answers, read as a retry's
	// from the second attempt on) is sent again under the same key to the next replica, after the
	// answer's Retry-After (RetryPause when it gives none), up to Retries times. A change refused
	// ("nothing was changed") is not: the client's next change has a new key, as the promise
	// allows. The history holds the change once, from its first attempt's call to its last's
	// answer, which decides it. A purchase or cart refused with a Retry-After (sku_busy) is sent
	// again after it, under a new key. 0: every change is sent once.
	Retries    int
	RetryPause time.Duration // default 100 ms
	// Impatient is the share of clients, from 0 to 1, that give up on each request after
	// GiveUpAfter (default 500 ms), well before the service's own bounds.
	Impatient   float64
	GiveUpAfter time.Duration
	// Eager is the share of clients that send their next change at once, without Pause.
	Eager float64
	// Observe, if set, is told of every operation that got an answer or none, kept in the history
	// or not (failed reads, requests not sent), as it ends: for a timeline of latencies.
	Observe func(Observation)
}

// Observation is one operation as Config.Observe sees it.
type Observation struct {
	Client       int
	Kind         Kind
	Answer       string // "201", "409 out_of_stock", "503 lock_lost", "cut", "not sent"
	Result       Result // as first recorded (Unknown for an answer that is not a verdict)
	Start, End   time.Time
	InHistory    bool
	Replica, Key string
}

func (c *Config) defaults() error {
	if len(c.Replicas) == 0 {
		return errors.New("lincheck: no replicas")
	}
	if c.SKUs[0] == "" && c.SKUs[1] == "" {
		c.SKUs = [2]string{"LIN-A", "LIN-B"}
	}
	if c.SKUs[0] == c.SKUs[1] || c.SKUs[0] == "" || c.SKUs[1] == "" {
		return fmt.Errorf("lincheck: two distinct SKUs needed, got %q", c.SKUs)
	}
	if c.Stock == 0 {
		c.Stock = 30
	}
	if c.MaxQty == 0 {
		c.MaxQty = 2
	}
	if c.Clients == 0 {
		c.Clients = 12
	}
	if c.MaxOps == 0 {
		c.MaxOps = 1500
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.RetryPause == 0 {
		c.RetryPause = 100 * time.Millisecond
	}
	if c.GiveUpAfter == 0 {
		c.GiveUpAfter = 500 * time.Millisecond
	}
	switch {
	case c.Retries < 0 || c.Impatient < 0 || c.Impatient > 1 || c.Eager < 0 || c.Eager > 1:
		return fmt.Errorf("lincheck: retries %d, impatient %v, eager %v: want retries from 0 and shares from 0 to 1", c.Retries, c.Impatient, c.Eager)
	case c.Stock < 0 || c.MaxQty < 1 || c.Clients < 1 || c.MaxOps < 1 || c.Duration < 0:
		return fmt.Errorf("lincheck: stock %d, max qty %d, clients %d, max ops %d, duration %v: want a stock from 0 and the others from 1",
			c.Stock, c.MaxQty, c.Clients, c.MaxOps, c.Duration)
	case len(c.Switches) > 0 && c.Duration == 0:
		return errors.New("lincheck: mode switches need a duration to spread them over")
	}
	if c.HTTPClient == nil {
		tr := &http.Transport{MaxIdleConns: 2 * c.Clients, MaxIdleConnsPerHost: c.Clients, IdleConnTimeout: 30 * time.Second}
		c.HTTPClient = &http.Client{Transport: tr, Timeout: c.RequestTimeout}
	}
	return nil
}

// Stats count what the history holds.
type Stats struct {
	Ops int // operations in the history
	// Unknown counts the answers of unknown outcome (internal/answers: outcome_unknown, an internal
	// error, no answer); those that a retry after the history found not done are left out of Ops
	// (see FoundNotDone).
	Unknown int
	// Answers counts answers by operation and status: "buy 201", "cart 409 out_of_stock",
	// "cancel 503 outcome_unknown", "read cut" (no answer).
	Answers map[string]int
	// NotSent counts requests whose connection could not even be opened: they cannot have
	// taken effect, and are left out of the history, as are failed reads.
	NotSent int
	// BadRequests counts 400 answers: requests this package got wrong (or a service that refuses
	// what its API documents). They changed nothing and are left out of the history.
	BadRequests int
	// BadAnswers counts success answers without the fields the API documents; they are in the
	// history as unknown outcomes.
	BadAnswers int
	// Problems holds the first few 400s and bad answers, verbatim.
	Problems []string
	// FoundDone and FoundNotDone count the operations of unknown outcome that a retry after the
	// history found done (kept as Applied) or not done (left out); the rest stay unknown.
	FoundDone, FoundNotDone int
	// Refused counts the changes answered "nothing was changed" (internal/answers: out_of_stock,
	// storage_unavailable, lock_lost, a 4xx...). Each is looked up by its key after the history;
	// BrokenPromises counts those found made, and the changes answered done found not made
	// (History.Broken says which); RefusalsUnchecked the refusals
	// no replica could be asked about. A refusal other than out_of_stock is left out of the
	// history: it changed nothing, so no operation can have seen it.
	Refused, BrokenPromises, RefusalsUnchecked int
	// DoneUnchecked counts the changes answered done (each looked up after the history too: one
	// found not made is a broken promise) that no replica could be asked about.
	DoneUnchecked int
	// Retried counts the changes sent more than once under their key (Config.Retries), Retries
	// the attempts after the first, and GaveUp the attempts an impatient client gave up on.
	// Resent counts the purchases and carts refused with a Retry-After and sent again after it,
	// under a new key.
	Retried, Retries, GaveUp, Resent int
}

// History is a recorded history, ready to check.
type History struct {
	SKUs        [2]string
	Stock       int64
	Ops         []porcupine.Operation
	Annotations []porcupine.Annotation // the lock-mode switches
	Stats       Stats
	// Broken are the operations whose answer a look-up after the history found untrue ("nothing
	// was changed" found made, done found not made): each an anomaly, whatever Porcupine says of
	// the history.
	Broken []BrokenPromise
	Took   time.Duration // wall time of the recording
}

// Recorder runs the clients of one history.
type Recorder struct {
	cfg   Config
	run   string // a random tag in every key, so that runs never share one
	t0    time.Time
	stop  atomic.Bool
	ops   atomic.Int64
	wg    sync.WaitGroup
	swWG  sync.WaitGroup
	swErr error
	halt  chan struct{}
	once  sync.Once
	hOnce sync.Once

	mu   sync.Mutex
	hist []porcupine.Operation
	reqs []request // hist[i] was sent as reqs[i]
	// lastFound is the replica that last answered a look-up (find), the first one asked next.
	lastFound atomic.Int32
	refusals  []refusal
	broken    []BrokenPromise
	notes     []porcupine.Annotation
	stats     Stats
	result    *History
}

// Record resets the SKUs, switches the replicas to cfg.Mode, and records a history for
// cfg.Duration (or until cfg.MaxOps operations).
func Record(ctx context.Context, cfg Config) (*History, error) {
	if cfg.Duration == 0 {
		return nil, errors.New("lincheck: Record needs a duration (Start and Stop record without one)")
	}
	r, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return r.Wait(ctx)
}

// Start resets the SKUs, switches the replicas to cfg.Mode if set, and starts the clients.
func Start(ctx context.Context, cfg Config) (*Recorder, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	var tag [4]byte
	if _, err := crand.Read(tag[:]); err != nil {
		return nil, fmt.Errorf("lincheck: random run tag: %w", err)
	}
	r := &Recorder{cfg: cfg, run: hex.EncodeToString(tag[:]), halt: make(chan struct{}), stats: Stats{Answers: map[string]int{}}}
	if cfg.Mode != "" {
		if err := r.setMode(ctx, cfg.Mode, 0); err != nil {
			return nil, err
		}
	}
	for _, sku := range cfg.SKUs {
		body := fmt.Sprintf(`{"stock":%d}`, cfg.Stock)
		st, raw, err := r.send(ctx, http.MethodPut, cfg.Replicas[0]+"/admin/products/"+url.PathEscape(sku), body, true, nil)
		if err != nil {
			return nil, fmt.Errorf("lincheck: reset %s: %w", sku, err)
		}
		if st != http.StatusOK {
			return nil, fmt.Errorf("lincheck: reset %s: %d %s", sku, st, strings.TrimSpace(string(raw)))
		}
	}
	r.t0 = time.Now()
	for c := range cfg.Clients {
		r.wg.Add(1)
		go r.client(ctx, c)
	}
	if len(cfg.Switches) > 0 {
		r.swWG.Add(1)
		go r.switcher(ctx)
	}
	return r, nil
}

// Wait waits for the history's duration, and for the last of the switches (a switch waits for
// the fleet, and a Disrupt beside it may take long), then stops the clients as Stop does.
func (r *Recorder) Wait(ctx context.Context) (*History, error) {
	if r.cfg.Duration > 0 {
		select {
		case <-time.After(time.Until(r.t0.Add(r.cfg.Duration))):
		case <-ctx.Done():
		case <-r.clientsDone():
		}
	}
	switched := make(chan struct{})
	go func() { r.swWG.Wait(); close(switched) }()
	select {
	case <-switched:
	case <-ctx.Done():
	}
	return r.Stop()
}

// clientsDone is closed once every client has stopped (on its own: MaxOps reached).
func (r *Recorder) clientsDone() <-chan struct{} {
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	return done
}

// Stop stops the clients, waits for the operations in flight, and returns the history. An
// operation of unknown outcome gets the end of the history as its return: it may take effect
// at any time after its call.
func (r *Recorder) Stop() (*History, error) {
	r.once.Do(func() {
		r.Halt()
		if !r.cfg.KeepUnknown {
			r.resolve()
		}
		r.checkRefusals()
		r.checkDone()
		r.mu.Lock()
		defer r.mu.Unlock()
		var kept []porcupine.Operation
		for _, op := range r.hist {
			if op.Output != nil {
				kept = append(kept, op)
			}
		}
		r.hist = kept
		end := int64(0)
		for _, op := range r.hist {
			end = max(end, op.Return)
		}
		end++
		for _, n := range r.notes {
			end = max(end, n.End+1)
		}
		for i := range r.hist {
			if res := r.hist[i].Output.(Output).Result; res == Unknown || res == Applied {
				r.hist[i].Return = end
			}
		}
		sort.SliceStable(r.hist, func(i, j int) bool { return r.hist[i].Call < r.hist[j].Call })
		r.stats.Ops = len(r.hist)
		r.stats.Refused, r.stats.BrokenPromises = len(r.refusals), len(r.broken)
		r.result = &History{SKUs: r.cfg.SKUs, Stock: r.cfg.Stock, Ops: r.hist, Annotations: r.notes, Stats: r.stats, Took: time.Since(r.t0),
			Broken: r.broken}
	})
	return r.result, r.swErr
}

// Halt stops the clients and the switches and waits for the operations in flight, without
// resolving the unknown outcomes yet: so that the faults can be healed, and the service's commits
// settle, before Stop looks them up. Stop calls it; calling it twice is safe.
func (r *Recorder) Halt() {
	r.hOnce.Do(func() {
		r.stop.Store(true)
		close(r.halt)
		r.wg.Wait()
		r.swWG.Wait()
	})
}

// now is monotonic nanoseconds since the history began.
func (r *Recorder) now() int64 { return time.Since(r.t0).Nanoseconds() }

// ownOrder is an order this client was answered 201 for, and may cancel.
type ownOrder struct {
	id  int64
	sku int
	qty int64
	key string
}

func (r *Recorder) client(ctx context.Context, c int) {
	defer r.wg.Done()
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(c)))
	var mine []ownOrder
	var again *Input // a refused purchase or cart to send again under a new key (Config.Retries)
	for i := 0; ; i++ {
		if r.stop.Load() || ctx.Err() != nil || r.ops.Add(1) > int64(r.cfg.MaxOps) {
			return
		}
		first := (c + i) % len(r.cfg.Replicas)
		qty := func() int64 { return 1 + rng.Int64N(r.cfg.MaxQty) }
		var in Input
		var cancel ownOrder
		switch p := rng.IntN(100); {
		case again != nil:
			in, again = *again, nil
			r.count("", func(s *Stats) { s.Resent++ })
		case p < 25:
			in = Input{Kind: Read, SKU: rng.IntN(2)}
		case p < 80 || len(mine) == 0:
			in = Input{Kind: Buy, SKU: rng.IntN(2)}
			in.Qty[in.SKU] = qty()
			if p >= 65 && p < 80 {
				in = Input{Kind: Cart, Qty: [2]int64{qty(), qty()}}
			}
		default:
			k := rng.IntN(len(mine))
			cancel = mine[k]
			mine = append(mine[:k], mine[k+1:]...)
			in = Input{Kind: Cancel, SKU: cancel.sku}
			in.Qty[cancel.sku] = cancel.qty
		}
		key := fmt.Sprintf("lc-%s-%d-%d", r.run, c, i)
		out, got, kept, wait := r.do(ctx, c, first, in, key, cancel)
		mine = append(mine, got...)
		switch {
		case r.cfg.Retries > 0 && out.Result == Refused && wait > 0 && (in.Kind == Buy || in.Kind == Cart):
			again = &in // refused with a Retry-After (sku_busy): sent again after it, under a new key
			time.Sleep(wait)
		case !kept || out.Result == Unknown:
			time.Sleep(50 * time.Millisecond) // do not hammer a replica that is down
		case r.cfg.Pause > 0 && !r.eager(c):
			time.Sleep(r.cfg.Pause)
		}
	}
}

// impatient says whether client c gives up on its requests early (Config.Impatient): the first
// clients are.
func (r *Recorder) impatient(c int) bool { return c < int(r.cfg.Impatient*float64(r.cfg.Clients)+0.5) }

// eager says whether client c sends its changes without a pause (Config.Eager): the last clients are.
func (r *Recorder) eager(c int) bool {
	return r.cfg.Clients-1-c < int(r.cfg.Eager*float64(r.cfg.Clients)+0.5)
}

// count adds an answer to the stats, and lets f change them under the same lock.
func (r *Recorder) count(answer string, f func(*Stats)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if answer != "" {
		r.stats.Answers[answer]++
	}
	if f != nil {
		f(&r.stats)
	}
}

// replicaName is the replica's position in the list, for descriptions: "replica 2 of 3".
func replicaName(u string, all []string) string {
	for i, a := range all {
		if a == u {
			return fmt.Sprintf("replica %d", i+1)
		}
	}
	return u
}

// setMode switches the fleet to the lock mode through replica u. A replica that was just
// restarted may not answer yet (a connection refused, 503 while it rejoins): the switch is
// asked again, through the next replica, until ctx ends.
func (r *Recorder) setMode(ctx context.Context, mode string, u int) error {
	b, _ := json.Marshal(map[string]string{"mode": mode})
	for {
		url := r.cfg.Replicas[u%len(r.cfg.Replicas)]
		st, raw, err := r.send(ctx, http.MethodPut, url+"/admin/lock-mode", string(b), true, nil)
		switch {
		case err == nil && st == http.StatusOK:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("lincheck: switch to %s: %w", mode, ctx.Err())
		case err == nil && st != http.StatusServiceUnavailable:
			return fmt.Errorf("lincheck: switch %s to %s: %d %s", url, mode, st, strings.TrimSpace(string(raw)))
		}
		u++
		time.Sleep(100 * time.Millisecond)
	}
}

// switcher switches the replicas' lock mode through cfg.Switches during the history, and notes
// each switch for the visualization.
func (r *Recorder) switcher(ctx context.Context) {
	defer r.swWG.Done()
	every := r.cfg.Duration / time.Duration(len(r.cfg.Switches)+1)
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 0x5717c4))
	for i, mode := range r.cfg.Switches {
		select {
		case <-time.After(time.Until(r.t0.Add(time.Duration(i+1) * every))):
		case <-r.halt:
			return
		case <-ctx.Done():
			return
		}
		from := r.now()
		through := rng.IntN(len(r.cfg.Replicas))
		switched := make(chan error, 1)
		go func() { switched <- r.setMode(ctx, mode, through) }()
		details := fmt.Sprintf("PUT /admin/lock-mode {\"mode\":%q} through replica %d", mode, through+1)
		var err error
		if r.cfg.Disrupt != nil {
			what, derr := r.cfg.Disrupt(ctx, i)
			details += "; meanwhile " + what
			err = derr
		}
		err = errors.Join(err, <-switched)
		r.mu.Lock()
		r.notes = append(r.notes, porcupine.Annotation{Tag: "lock mode", Start: from, End: r.now(), Description: "→ " + mode,
			Details: details, BackgroundColor: "#fde68a"})
		r.mu.Unlock()
		if err != nil {
			r.swErr = err
			return
		}
	}
}
