package lincheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// shop is an in-memory stand-in for the order service's API, correct (one mutex around every
// change) or racy (it reads the stock, waits, and writes what it computed, as mode none does).
type shop struct {
	racy  bool
	flaky bool // one answer in ten is a 503: a third refused, a third unknown, a third unknown after the change
	// lies answers a change made but not confirmed "503 storage_unavailable" (nothing was
	// changed) instead of outcome_unknown: the lie the checker must catch.
	lies bool
	// forgets loses one sale in seven after answering it 201, as a database that lost a commit:
	// its key is no longer found.
	forgets   bool
	sales     int
	answered  int
	keys      map[string]bool
	mu        sync.Mutex
	stock     map[string]int64
	orders    map[int64]order
	next      int64
	modes     []string
	cancelled map[int64]bool
	lookUps   int
	// slowFirst makes a purchase's first attempt under its key take this long; a later attempt
	// meanwhile is answered 409 request_in_progress, or, when retryLies, 503 lock_unavailable
	// ("nothing was sold") while the first goes on to sell: the lie a retry must not be told.
	slowFirst time.Duration
	retryLies bool
	inFlight  map[string]bool
	replies   map[string]map[string]any // a key's 201, replayed
	// busyEvery answers every busyEvery-th new key 503 sku_busy with Retry-After 1; resentAfter
	// records, for each client's body so refused, how long after the refusal that client sent it
	// again under another key.
	busyEvery   int
	busyKeys    int
	refusedAt   map[string]time.Time
	resentAfter []time.Duration
}

type order struct {
	sku string
	qty int64
	key string
}

func newShop(racy bool) *shop {
	return &shop{racy: racy, stock: map[string]int64{}, orders: map[int64]order{}, cancelled: map[int64]bool{}, keys: map[string]bool{},
		inFlight: map[string]bool{}, replies: map[string]map[string]any{}, refusedAt: map[string]time.Time{}}
}

func (s *shop) get(sku string) int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.stock[sku] }

func (s *shop) set(sku string, n int64) { s.mu.Lock(); defer s.mu.Unlock(); s.stock[sku] = n }

// change applies f to the stock: under the lock, or as a racy read-modify-write.
func (s *shop) change(f func(read func(string) int64, write func(string, int64)) bool) bool {
	if s.racy {
		return f(s.get, func(sku string, n int64) { time.Sleep(time.Millisecond); s.set(sku, n) })
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return f(func(sku string) int64 { return s.stock[sku] }, func(sku string, n int64) { s.stock[sku] = n })
}

func (s *shop) newOrder(o order) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.orders[s.next] = o
	return s.next
}

// fail reports whether to answer 503 instead, before the change (with code) or after it
// (afterCode, which says the outcome is unknown, unless the shop lies).
func (s *shop) fail() (before bool, code string, after bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answered++
	if !s.flaky || s.answered%10 != 0 {
		return false, "", false
	}
	switch s.answered % 30 {
	case 0:
		return true, "lock_unavailable", false
	case 10:
		return true, "outcome_unknown", false
	}
	return false, "", true
}

// afterCode is the code of a 503 for a change that was made.
func (s *shop) afterCode() string {
	if s.lies {
		return "storage_unavailable"
	}
	return "outcome_unknown"
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case r.Method == "PUT" && path == "/admin/lock-mode":
		var b struct{ Mode string }
		_ = json.NewDecoder(r.Body).Decode(&b)
		s.mu.Lock()
		s.modes = append(s.modes, b.Mode)
		s.mu.Unlock()
		answer(w, 200, map[string]string{"mode": b.Mode})
	case r.Method == "PUT" && strings.HasPrefix(path, "/admin/products/"):
		var b struct{ Stock int64 }
		_ = json.NewDecoder(r.Body).Decode(&b)
		s.set(strings.TrimPrefix(path, "/admin/products/"), b.Stock)
		answer(w, 200, map[string]any{})
	case r.Method == "GET" && path == "/v1/orders":
		s.mu.Lock()
		seen := s.keys[r.URL.Query().Get("request_id")]
		s.lookUps++
		s.mu.Unlock()
		if !seen {
			answer(w, 404, map[string]string{"code": "unknown_order"})
			return
		}
		answer(w, 200, map[string]any{"order": map[string]any{}})
	case r.Method == "GET" && strings.HasPrefix(path, "/v1/orders/"):
		id, _ := strconv.ParseInt(strings.TrimPrefix(path, "/v1/orders/"), 10, 64)
		s.mu.Lock()
		_, ok := s.orders[id]
		done := s.cancelled[id]
		s.lookUps++
		s.mu.Unlock()
		o := map[string]any{}
		if done {
			o["cancelled_at"] = time.Now()
		}
		if !ok {
			answer(w, 404, map[string]string{"code": "unknown_order"})
			return
		}
		answer(w, 200, map[string]any{"order": o})
	case r.Method == "GET" && strings.HasPrefix(path, "/v1/products/"):
		answer(w, 200, map[string]int64{"stock": s.get(strings.TrimPrefix(path, "/v1/products/"))})
	case r.Method == "POST" && path == "/v1/orders":
		s.purchase(w, r)
	case r.Method == "POST" && strings.HasSuffix(path, "/cancel"):
		id, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(path, "/v1/orders/"), "/cancel"), 10, 64)
		var b struct {
			RequestID string `json:"request_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&b)
		s.mu.Lock()
		o, ok := s.orders[id]
		done := s.cancelled[id]
		s.mu.Unlock()
		if !ok || o.key != b.RequestID || r.Header.Get("Content-Type") != "application/json" {
			answer(w, 400, map[string]string{"code": "invalid_request"})
			return
		}
		if done {
			answer(w, 200, map[string]any{"remaining": s.get(o.sku), "replayed": true})
			return
		}
		before, code, after := s.fail()
		if before {
			answer(w, 503, map[string]string{"code": code})
			return
		}
		s.mu.Lock()
		s.cancelled[id] = true
		s.mu.Unlock()
		var left int64
		s.change(func(read func(string) int64, write func(string, int64)) bool {
			left = read(o.sku) + o.qty
			write(o.sku, left)
			return true
		})
		if after {
			answer(w, 503, map[string]string{"code": s.afterCode()})
			return
		}
		answer(w, 200, map[string]any{"remaining": left})
	default:
		answer(w, 404, map[string]string{"code": "not_found"})
	}
}

func (s *shop) purchase(w http.ResponseWriter, r *http.Request) {
	var b struct {
		SKU   string
		Qty   int64
		Items []struct {
			SKU string
			Qty int64
		}
	}
	key := r.Header.Get("Idempotency-Key")
	if json.NewDecoder(r.Body).Decode(&b) != nil || key == "" || strings.Contains(key, "#") {
		answer(w, 400, map[string]string{"code": "invalid_request"})
		return
	}
	s.mu.Lock()
	seen, busy := s.keys[key], s.inFlight[key]
	replay := map[string]any{"replayed": true}
	for k, v := range s.replies[key] {
		replay[k] = v
	}
	if !seen && !busy {
		s.inFlight[key] = true
		defer func() { s.mu.Lock(); delete(s.inFlight, key); s.mu.Unlock() }()
	}
	s.mu.Unlock()
	if s.busyEvery > 0 && !seen && !busy {
		client := strings.Split(key, "-")[2] // lc-<run>-<client>-<n>
		body := fmt.Sprint(client, b.SKU, b.Qty, b.Items)
		s.mu.Lock()
		s.busyKeys++
		refuse := s.busyKeys%s.busyEvery == 0
		if at, ok := s.refusedAt[body]; ok && !refuse {
			s.resentAfter = append(s.resentAfter, time.Since(at))
			delete(s.refusedAt, body)
		}
		if refuse {
			s.refusedAt[body] = time.Now()
		}
		s.mu.Unlock()
		if refuse {
			w.Header().Set("Retry-After", "1")
			answer(w, 503, map[string]string{"code": "sku_busy"})
			return
		}
	}
	switch {
	case seen:
		answer(w, 200, replay)
		return
	case busy && s.retryLies:
		answer(w, 503, map[string]string{"code": "lock_unavailable"})
		return
	case busy:
		answer(w, 409, map[string]string{"code": "request_in_progress"})
		return
	}
	time.Sleep(s.slowFirst)
	before, code, after := s.fail()
	if before {
		answer(w, 503, map[string]string{"code": code})
		return
	}
	sold := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.sales++
		s.keys[key] = !(s.forgets && !after && s.sales%7 == 0)
		return !after
	}
	if b.Items == nil {
		var left int64
		ok := s.change(func(read func(string) int64, write func(string, int64)) bool {
			left = read(b.SKU) - b.Qty
			if left < 0 {
				return false
			}
			write(b.SKU, left)
			return true
		})
		if !ok {
			answer(w, 409, map[string]string{"code": "out_of_stock"})
			return
		}
		id := s.newOrder(order{b.SKU, b.Qty, key})
		if !sold() {
			answer(w, 503, map[string]string{"code": s.afterCode()})
			return
		}
		s.reply(w, key, map[string]any{"remaining": left, "order": map[string]any{"id": id}})
		return
	}
	left := map[string]int64{}
	short := ""
	ok := s.change(func(read func(string) int64, write func(string, int64)) bool {
		for _, it := range b.Items {
			if left[it.SKU] = read(it.SKU) - it.Qty; left[it.SKU] < 0 {
				short = it.SKU
				return false
			}
		}
		for sku, n := range left {
			write(sku, n)
		}
		return true
	})
	if !ok {
		answer(w, 409, map[string]string{"code": "out_of_stock", "sku": short})
		return
	}
	var orders []map[string]any
	for _, it := range b.Items {
		orders = append(orders, map[string]any{"id": s.newOrder(order{it.SKU, it.Qty, key}), "sku": it.SKU, "qty": it.Qty})
	}
	if !sold() {
		answer(w, 503, map[string]string{"code": s.afterCode()})
		return
	}
	s.reply(w, key, map[string]any{"remaining": left, "orders": orders})
}

// reply answers a sale 201, and keeps the answer for the key's replays.
func (s *shop) reply(w http.ResponseWriter, key string, v map[string]any) {
	s.mu.Lock()
	s.replies[key] = v
	s.mu.Unlock()
	answer(w, 201, v)
}

// The recorder against a correct shop finds it linearizable, and against a racy one finds it is
// not, with the visualization written; every kind of operation and answer occurs.
func TestRecordAndCheck(t *testing.T) {
	for _, racy := range []bool{false, true} {
		t.Run(map[bool]string{false: "locked", true: "racy"}[racy], func(t *testing.T) {
			sh := newShop(racy)
			sh.flaky = !racy
			var urls []string
			for range 3 {
				srv := httptest.NewServer(sh)
				t.Cleanup(srv.Close)
				urls = append(urls, srv.URL)
			}
			h, err := Record(context.Background(), Config{Replicas: urls, AdminToken: "x", Stock: 10, Clients: 8,
				Duration: 700 * time.Millisecond, Mode: "zk", Switches: []string{"zk-herd", "zk"}, MaxOps: 800, Pause: 5 * time.Millisecond, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			st := h.Stats
			t.Logf("%d ops, answers %v", st.Ops, st.Answers)
			for _, a := range []string{"buy 201", "buy 409 out_of_stock", "cart 201", "cart 409 out_of_stock", "cancel 200", "read 200"} {
				if st.Answers[a] == 0 {
					t.Errorf("no %q in the history", a)
				}
			}
			if st.BadRequests+st.BadAnswers != 0 || st.BrokenPromises != 0 || len(h.Broken) != 0 {
				t.Errorf("stats %+v, broken %v", st, h.Broken)
			}
			// The flaky shop's outcome_unknown answers are resolved by retries after the history
			// (unless a retry is answered 503 too); its refusals kept their promise.
			if sh.flaky && (st.FoundDone == 0 || st.FoundNotDone == 0 || st.FoundDone+st.FoundNotDone > st.Unknown) {
				t.Errorf("unknown outcomes %d, found done %d, found not done %d", st.Unknown, st.FoundDone, st.FoundNotDone)
			}
			// The mode is the fleet's: set once before the history and once per switch, each
			// through one replica.
			if len(h.Annotations) != 2 || len(sh.modes) != 3 {
				t.Errorf("annotations %v, modes set %v", h.Annotations, sh.modes)
			}
			v := h.Check(30 * time.Second)
			if racy == v.Linearizable() {
				t.Fatalf("racy %v, Porcupine says %s", racy, v.Outcome)
			}
			if racy {
				path := filepath.Join(t.TempDir(), "viz", "racy.html")
				if err := v.Visualize(path); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(path)
				if err != nil || !strings.Contains(string(b), "buy A") && !strings.Contains(string(b), "LIN-A") {
					t.Fatalf("visualization: %v, %d bytes", err, len(b))
				}
			}
		})
	}
}

// A purchase whose reused connection dies after the replica received it (a replica killed
// mid-purchase) is of unknown outcome, never "not sent", even though net/http would resend a
// request with an Idempotency-Key and meet a refused dial: the nemesis found sales missing from
// histories so, and Porcupine then rightly found the history impossible.
func TestAPurchaseCutAfterItArrivedIsNotCountedNotSent(t *testing.T) {
	var received atomic.Int64
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet {
			_, _ = io.WriteString(w, "{}") // opens the connection the purchase will reuse
			return
		}
		received.Add(1)
		srv.Listener.Close() // the replica is gone: a resend's dial is refused
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // and the purchase's connection dies without an answer
		}
	}))
	defer srv.Close()
	r := &Recorder{cfg: Config{HTTPClient: &http.Client{Transport: &http.Transport{}}}}
	if _, _, err := r.send(context.Background(), http.MethodGet, srv.URL+"/v1/products/A", "", false, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err := r.send(context.Background(), http.MethodPost, srv.URL+"/v1/orders", `{"sku":"A","qty":1}`, false,
		map[string]string{"Idempotency-Key": "K-1"})
	if err == nil || received.Load() != 1 {
		t.Fatalf("purchase: %v, received %d times", err, received.Load())
	}
	if notSent(err) {
		t.Fatalf("a purchase the replica received is counted not sent: %v", err)
	}
}

// ResolveByKey resolves the flaky shop's unknown outcomes by looking them up, after Halt, without
// sending any of them again: the stock does not move between Halt and Stop, some are found done
// and some not, and the history is linearizable. Observe sees every operation.
func TestResolveByKeyLooksUpInsteadOfResending(t *testing.T) {
	sh := newShop(false)
	sh.flaky = true
	var urls []string
	for range 2 {
		srv := httptest.NewServer(sh)
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	var observed atomic.Int64
	rec, err := Start(context.Background(), Config{Replicas: urls, AdminToken: "x", Stock: 10, Clients: 6, MaxOps: 600,
		Pause: 2 * time.Millisecond, Seed: 3, ResolveByKey: true, Observe: func(Observation) { observed.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	rec.Halt()
	before := [2]int64{sh.get("LIN-A"), sh.get("LIN-B")}
	h, err := rec.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if after := [2]int64{sh.get("LIN-A"), sh.get("LIN-B")}; after != before {
		t.Errorf("the stock moved from %v to %v while the unknown outcomes were resolved", before, after)
	}
	st := h.Stats
	if st.FoundDone == 0 || st.FoundNotDone == 0 || sh.lookUps < st.FoundDone+st.FoundNotDone {
		t.Errorf("unknown %d, found done %d, not done %d, look-ups %d", st.Unknown, st.FoundDone, st.FoundNotDone, sh.lookUps)
	}
	if n := observed.Load(); n < int64(st.Ops) {
		t.Errorf("observed %d operations, %d in the history", n, st.Ops)
	}
	if v := h.Check(30 * time.Second); !v.Linearizable() {
		t.Errorf("Porcupine says %s", v.Outcome)
	}
}

// Clients that give up early and retry under the same key on another replica meet the first
// attempt still in flight: a shop that tells the retry "nothing was sold" while the first goes on
// to sell is caught, one that answers request_in_progress and then replays is not.
func TestARetryToldNothingWhileItsKeySellsIsCaught(t *testing.T) {
	for _, lies := range []bool{false, true} {
		t.Run(map[bool]string{false: "honest", true: "lies"}[lies], func(t *testing.T) {
			sh := newShop(false)
			sh.slowFirst, sh.retryLies = 40*time.Millisecond, lies
			var urls []string
			for range 2 {
				srv := httptest.NewServer(sh)
				t.Cleanup(srv.Close)
				urls = append(urls, srv.URL)
			}
			h, err := Record(context.Background(), Config{Replicas: urls, AdminToken: "x", Stock: 400, Clients: 6, Duration: 600 * time.Millisecond,
				MaxOps: 300, Seed: 1, Retries: 4, RetryPause: 5 * time.Millisecond, Impatient: 0.5, GiveUpAfter: 15 * time.Millisecond, Eager: 0.5, ResolveByKey: true})
			if err != nil {
				t.Fatal(err)
			}
			st := h.Stats
			t.Logf("%d ops, retried %d (%d retries, %d given up), broken %d, answers %v", st.Ops, st.Retried, st.Retries, st.GaveUp, st.BrokenPromises, st.Answers)
			if st.Retried == 0 || st.GaveUp == 0 {
				t.Fatalf("no change was retried after its client gave up: %+v", st)
			}
			if lies != (st.BrokenPromises > 0) {
				t.Errorf("lies %v, broken promises %d: %v", lies, st.BrokenPromises, h.Broken)
			}
			if st.BadAnswers != 0 {
				t.Errorf("bad answers: %v", st.Problems)
			}
			// The lying shop's refused sales are left out of the history, which then sells more
			// than it holds: Porcupine finds that too.
			if v := h.Check(30 * time.Second); v.Linearizable() == lies {
				t.Errorf("lies %v, Porcupine: %s", lies, v.Outcome)
			}
		})
	}
}

// A purchase or cart refused with a Retry-After (sku_busy) is sent again after it, under a new
// key, as a client who reads the answer does.
func TestARefusedChangeIsResentAfterRetryAfter(t *testing.T) {
	sh := newShop(false)
	sh.busyEvery = 7
	srv := httptest.NewServer(sh)
	t.Cleanup(srv.Close)
	h, err := Record(context.Background(), Config{Replicas: []string{srv.URL}, AdminToken: "x", Stock: 1000, Clients: 4,
		Duration: 2500 * time.Millisecond, MaxOps: 400, Pause: 20 * time.Millisecond, Seed: 1, Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	sh.mu.Lock()
	resent := slices.Clone(sh.resentAfter)
	sh.mu.Unlock()
	t.Logf("%d refused with Retry-After, resent %d (%v), answers %v", h.Stats.Answers["buy 503 sku_busy"]+h.Stats.Answers["cart 503 sku_busy"], h.Stats.Resent, resent, h.Stats.Answers)
	if h.Stats.Resent == 0 || len(resent) == 0 {
		t.Fatalf("no refused change was sent again: stats %+v", h.Stats)
	}
	for _, d := range resent {
		if d < 950*time.Millisecond {
			t.Errorf("a refused change was sent again %v after its Retry-After of 1 s", d)
		}
	}
	if h.Stats.BrokenPromises != 0 || !h.Check(30*time.Second).Linearizable() {
		t.Errorf("broken %v; the honest shop's history must pass", h.Broken)
	}
}
