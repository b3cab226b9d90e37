package lincheck

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
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
	switch {
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
	// Unknown counts the answers of unknown outcome; those that a retry after the history found
	// not done are left out of Ops (see FoundNotDone).
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
}

// History is a recorded history, ready to check.
type History struct {
	SKUs        [2]string
	Stock       int64
	Ops         []porcupine.Operation
	Annotations []porcupine.Annotation // the lock-mode switches
	Stats       Stats
	Took        time.Duration // wall time of the recording
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

	mu     sync.Mutex
	hist   []porcupine.Operation
	reqs   []request // hist[i] was sent as reqs[i]
	notes  []porcupine.Annotation
	stats  Stats
	result *History
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
		r.result = &History{SKUs: r.cfg.SKUs, Stock: r.cfg.Stock, Ops: r.hist, Annotations: r.notes, Stats: r.stats, Took: time.Since(r.t0)}
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
	for i := 0; ; i++ {
		if r.stop.Load() || ctx.Err() != nil || r.ops.Add(1) > int64(r.cfg.MaxOps) {
			return
		}
		replica := r.cfg.Replicas[(c+i)%len(r.cfg.Replicas)]
		qty := func() int64 { return 1 + rng.Int64N(r.cfg.MaxQty) }
		var in Input
		var cancel ownOrder
		switch p := rng.IntN(100); {
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
		out, got, kept := r.do(ctx, c, replica, in, key, cancel)
		mine = append(mine, got...)
		if !kept || out.Result == Unknown {
			time.Sleep(50 * time.Millisecond) // do not hammer a replica that is down
		} else if r.cfg.Pause > 0 {
			time.Sleep(r.cfg.Pause)
		}
	}
}

// do sends one operation and records it; kept is false when it is left out of the history. got
// are the orders it was answered 201 for.
func (r *Recorder) do(ctx context.Context, c int, replica string, in Input, key string, cancel ownOrder) (out Output, got []ownOrder, kept bool) {
	var method, path, body string
	var hdr map[string]string
	skus := r.cfg.SKUs
	switch in.Kind {
	case Buy:
		method, path = http.MethodPost, "/v1/orders"
		body = fmt.Sprintf(`{"sku":%q,"qty":%d}`, skus[in.SKU], in.Qty[in.SKU])
		hdr = map[string]string{"Idempotency-Key": key}
	case Cart:
		method, path = http.MethodPost, "/v1/orders"
		body = fmt.Sprintf(`{"items":[{"sku":%q,"qty":%d},{"sku":%q,"qty":%d}]}`, skus[0], in.Qty[0], skus[1], in.Qty[1])
		hdr = map[string]string{"Idempotency-Key": key}
	case Cancel:
		method, path = http.MethodPost, fmt.Sprintf("/v1/orders/%d/cancel", cancel.id)
		b, _ := json.Marshal(map[string]string{"request_id": cancel.key})
		body = string(b)
		key = cancel.key
	case Read:
		method, path = http.MethodGet, "/v1/products/"+url.PathEscape(skus[in.SKU])
	}
	req := request{replica: replica, method: method, path: path, body: body, hdr: hdr}
	started := time.Now()
	call := r.now()
	status, raw, err := r.send(ctx, method, replica+path, body, false, hdr)
	ret := r.now()
	if r.cfg.Observe != nil {
		defer func() {
			answer := out.Answer
			if err != nil && notSent(err) {
				answer = "not sent"
			}
			r.cfg.Observe(Observation{Client: c, Kind: in.Kind, Answer: answer, Result: out.Result, Start: started,
				End: started.Add(time.Duration(ret - call)), InHistory: kept, Replica: replica, Key: key})
		}()
	}
	name := replicaName(replica, r.cfg.Replicas)
	meta := fmt.Sprintf("%s, key %s", name, key)
	if in.Kind == Cancel {
		meta = fmt.Sprintf("%s, order %d (key %s)", name, cancel.id, key)
	}
	var e struct {
		Code string `json:"code"`
		SKU  string `json:"sku"`
	}
	_ = json.Unmarshal(raw, &e)
	out = Output{Result: Unknown, Short: -1, Answer: strings.TrimSpace(fmt.Sprintf("%d %s", status, e.Code))}
	if err != nil {
		out.Answer = "cut"
		if notSent(err) {
			r.count(in.Kind.String()+" not sent", func(s *Stats) { s.NotSent++ })
			return out, nil, false
		}
		meta += ": " + err.Error()
	}
	r.count(in.Kind.String()+" "+out.Answer, nil)
	problem := func(field func(*Stats) *int, what string) {
		r.count("", func(s *Stats) {
			*field(s)++
			if len(s.Problems) < 5 {
				s.Problems = append(s.Problems, fmt.Sprintf("%s %s %s (%s): %s: %d %s", method, path, body, meta, what, status, strings.TrimSpace(string(raw))))
			}
		})
	}
	switch {
	case status == http.StatusBadRequest:
		problem(func(s *Stats) *int { return &s.BadRequests }, "bad request")
		return out, nil, false
	case in.Kind == Read && status != http.StatusOK:
		return out, nil, false // a failed read changed nothing
	case status == http.StatusConflict && e.Code == "out_of_stock" && (in.Kind == Buy || in.Kind == Cart):
		out.Result = OutOfStock
		for i, s := range skus {
			if e.SKU == s {
				out.Short = i
			}
		}
	case status == http.StatusCreated && in.Kind == Buy:
		var a struct {
			Remaining *int64 `json:"remaining"`
			Order     *struct {
				ID int64 `json:"id"`
			} `json:"order"`
		}
		if json.Unmarshal(raw, &a) != nil || a.Remaining == nil || a.Order == nil {
			problem(func(s *Stats) *int { return &s.BadAnswers }, "no remaining or order")
			break
		}
		out.Result, out.Remaining[in.SKU] = OK, *a.Remaining
		got = []ownOrder{{id: a.Order.ID, sku: in.SKU, qty: in.Qty[in.SKU], key: key}}
		meta += fmt.Sprintf(", order %d", a.Order.ID)
	case status == http.StatusCreated && in.Kind == Cart:
		var a struct {
			Remaining map[string]int64 `json:"remaining"`
			Orders    []struct {
				ID  int64  `json:"id"`
				SKU string `json:"sku"`
				Qty int64  `json:"qty"`
			} `json:"orders"`
		}
		err := json.Unmarshal(raw, &a)
		r0, ok0 := a.Remaining[skus[0]]
		r1, ok1 := a.Remaining[skus[1]]
		if err != nil || !ok0 || !ok1 || len(a.Orders) != 2 {
			problem(func(s *Stats) *int { return &s.BadAnswers }, "not both SKUs' remaining and orders")
			break
		}
		out.Result, out.Remaining = OK, [2]int64{r0, r1}
		for _, o := range a.Orders {
			for i, s := range skus {
				if o.SKU == s {
					got = append(got, ownOrder{id: o.ID, sku: i, qty: o.Qty, key: key})
				}
			}
		}
	case status == http.StatusOK && in.Kind == Cancel:
		var a struct {
			Remaining *int64 `json:"remaining"`
		}
		if json.Unmarshal(raw, &a) != nil || a.Remaining == nil {
			problem(func(s *Stats) *int { return &s.BadAnswers }, "no remaining")
			break
		}
		out.Result, out.Remaining[in.SKU] = OK, *a.Remaining
	case status == http.StatusOK && in.Kind == Read:
		var a struct {
			Stock *int64 `json:"stock"`
		}
		if json.Unmarshal(raw, &a) != nil || a.Stock == nil {
			problem(func(s *Stats) *int { return &s.BadAnswers }, "no stock")
			return out, nil, false
		}
		out.Result, out.Remaining[in.SKU] = OK, *a.Stock
	}
	r.mu.Lock()
	r.hist = append(r.hist, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret, Metadata: meta})
	r.reqs = append(r.reqs, req)
	if out.Result == Unknown {
		r.stats.Unknown++
	}
	r.mu.Unlock()
	return out, got, true
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

// notSent reports whether the request failed before a connection was open, so the replica
// never saw it.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
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

// send sends one request; raw is the answer's body. A transport error (a timeout, a cut or
// refused connection) comes back as err with status 0.
func (r *Recorder) send(ctx context.Context, method, u, body string, admin bool, hdr map[string]string) (status int, raw []byte, err error) {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("lincheck: request %s %s: %w", method, u, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if admin {
		req.Header.Set("Authorization", "Bearer "+r.cfg.AdminToken)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	// net/http resends a request that has an Idempotency-Key when its reused connection dies
	// before the answer, if it can rewind the body. The resend's dial error would then say "not
	// sent" of a request the replica had received and may have applied (a replica killed
	// mid-purchase): the history would lose a sale. Without GetBody a request is resent only
	// if none of its body was written, which is what notSent assumes.
	req.GetBody = nil
	resp, err := r.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	if err != nil {
		return 0, raw, fmt.Errorf("lincheck: read the answer of %s %s: %w", method, u, err)
	}
	return resp.StatusCode, raw, nil
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

// request is how an operation was sent, to send it again.
type request struct {
	replica, method, path, body string
	hdr                         map[string]string
}

// resolve sends every operation of unknown outcome once more (see Config.KeepUnknown), a few at
// a time, and marks it Applied, or drops it (a nil Output), by the answer.
func (r *Recorder) resolve() {
	var todo []int
	for i, op := range r.hist {
		if op.Output.(Output).Result == Unknown {
			todo = append(todo, i)
		}
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(r.cfg.Clients, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r.resolveOne(i)
			}
		}()
	}
	for _, i := range todo {
		next <- i
	}
	close(next)
	wg.Wait()
}

func (r *Recorder) resolveOne(i int) {
	if r.cfg.ResolveByKey {
		r.lookUp(i)
		return
	}
	req := r.reqs[i]
	in := r.hist[i].Input.(Input)
	// The replica it went to first, then the others (it may be down).
	start := 0
	for k, u := range r.cfg.Replicas {
		if u == req.replica {
			start = k
		}
	}
	for k := range r.cfg.Replicas {
		u := r.cfg.Replicas[(start+k)%len(r.cfg.Replicas)]
		status, raw, err := r.send(context.Background(), req.method, u+req.path, req.body, false, req.hdr)
		if err != nil {
			continue
		}
		var a struct {
			Replayed bool   `json:"replayed"`
			Code     string `json:"code"`
		}
		_ = json.Unmarshal(raw, &a)
		done := a.Replayed && (status == http.StatusOK)
		notDone := status == http.StatusCreated && !a.Replayed ||
			status == http.StatusOK && in.Kind == Cancel && !a.Replayed ||
			status == http.StatusConflict && a.Code == "out_of_stock" && in.Kind != Cancel
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case done:
			out := r.hist[i].Output.(Output)
			out.Result = Applied
			r.hist[i].Output = out
			r.hist[i].Metadata = fmt.Sprintf("%v; sent again after the history: %d, replayed", r.hist[i].Metadata, status)
			r.stats.FoundDone++
		case notDone:
			r.hist[i].Output = nil
			r.stats.FoundNotDone++
		}
		return
	}
}

// lookUp resolves operation i by looking it up (Config.ResolveByKey), on each replica in turn
// until one answers.
func (r *Recorder) lookUp(i int) {
	req := r.reqs[i]
	in := r.hist[i].Input.(Input)
	var path string
	if in.Kind == Cancel {
		path, _, _ = strings.Cut(strings.TrimPrefix(req.path, "/v1/orders/"), "/")
		path = "/v1/orders/" + path
	} else {
		path = "/v1/orders?request_id=" + url.QueryEscape(req.hdr["Idempotency-Key"])
	}
	for _, u := range r.cfg.Replicas {
		status, raw, err := r.send(context.Background(), http.MethodGet, u+path, "", false, nil)
		if err != nil || status != http.StatusOK && status != http.StatusNotFound {
			continue
		}
		var a struct {
			Order struct {
				CancelledAt *time.Time `json:"cancelled_at"`
			} `json:"order"`
		}
		_ = json.Unmarshal(raw, &a)
		// A cancellation's order always exists; it was done if it is cancelled, and only this
		// client cancels it, once.
		done := status == http.StatusOK && (in.Kind != Cancel || a.Order.CancelledAt != nil)
		r.mu.Lock()
		defer r.mu.Unlock()
		if done {
			out := r.hist[i].Output.(Output)
			out.Result = Applied
			r.hist[i].Output = out
			r.hist[i].Metadata = fmt.Sprintf("%v; looked up after the history: done", r.hist[i].Metadata)
			r.stats.FoundDone++
		} else {
			r.hist[i].Output = nil
			r.stats.FoundNotDone++
		}
		return
	}
}
