package order_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
)

// stream reads a live-page stream's "state" events.
type stream struct {
	resp   *http.Response
	states chan map[string]any
}

func openStream(t *testing.T, url string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &stream{resp: resp, states: make(chan map[string]any, 100)}
	go func() {
		defer close(s.states)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if err := json.Unmarshal([]byte(data), &m); err == nil {
					s.states <- m
				}
			}
		}
	}()
	return s
}

// next waits for a state that satisfies cond.
func (s *stream) next(t *testing.T, within time.Duration, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case m, ok := <-s.states:
			if !ok {
				t.Fatal("the stream ended")
			}
			if cond(m) {
				return m
			}
		case <-deadline:
			t.Fatalf("no such state within %v", within)
		}
	}
}

func stockOf(m map[string]any) float64 {
	a, _ := m["audit"].(map[string]any)
	v, _ := a["stock"].(float64)
	return v
}

// A sale on any replica reaches a stream on another at once (pushed by the lock queue's watch
// and the sale itself, not by a poll of the database), with the queue and every replica's mode.
func TestEventsPushChanges(t *testing.T) {
	rs := ordertest.Start(t, 2, ordertest.Options{})
	resetStock(t, rs[0], "EV-1", 10)
	s := openStream(t, rs[1].URL+"/v1/events?sku=EV-1")
	first := s.next(t, 5*time.Second, func(m map[string]any) bool { return stockOf(m) == 10 })
	if first["mode"] != "zk" || first["replica"] != "order2" || first["queue"] == nil {
		t.Fatalf("first state: %v", first)
	}
	s.next(t, 5*time.Second, func(m map[string]any) bool { // both replicas announce themselves
		rs, _ := m["replicas"].([]any)
		return len(rs) == 2
	})
	for i := 0; i < 3; i++ {
		start := time.Now()
		if rep := buy(t, rs[0], "EV-1", 1, ""); rep.status != 201 {
			t.Fatalf("buy: %d %s", rep.status, rep.raw)
		}
		want := float64(9 - i)
		s.next(t, 2*time.Second, func(m map[string]any) bool { return stockOf(m) == want })
		t.Logf("sale %d on order1 seen on order2's stream %v after the purchase's answer", i+1, time.Since(start).Round(time.Millisecond))
	}
}

func TestEventsBadInputAndLimits(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{EventStreams: 2})[0]
	resetStock(t, r, "EV-2", 5)
	for path, want := range map[string]string{
		"/v1/events":                 "400 invalid_request",
		"/v1/events?sku=EV/2":        "400 invalid_request",
		"/v1/events?sku=EV-2&x=1":    "400 invalid_request",
		"/v1/events?sku=NO-SUCH-SKU": "404 unknown_sku",
		"/v1/products?x=1":           "400 invalid_request",
		"/assets/../server.go":       "404 not_found",
		"/assets/app.exe":            "404 not_found",
	} {
		rep := call(t, "GET", r.URL+path, "")
		if got := strings.TrimSpace(rep.codeLine()); got != want {
			t.Errorf("%s: %s (%s), want %s", path, got, rep.raw, want)
		}
	}
	a := openStream(t, r.URL+"/v1/events?sku=EV-2")
	openStream(t, r.URL+"/v1/events?sku=EV-2")
	if rep := call(t, "GET", r.URL+"/v1/events?sku=EV-2", ""); rep.status != 503 || rep.code() != "too_many_streams" {
		t.Fatalf("a third stream: %d %s", rep.status, rep.raw)
	}
	a.resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", r.URL+"/v1/events?sku=EV-2", nil)
		resp, err := http.DefaultClient.Do(req)
		ok := err == nil && resp.StatusCode == 200
		if resp != nil {
			resp.Body.Close()
		}
		cancel()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed stream's place was not freed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Shutting down ends the open streams.
	b := openStream(t, r.URL+"/v1/events?sku=EV-2")
	b.next(t, 5*time.Second, func(map[string]any) bool { return true })
	r.Srv.EndStreams()
	for range b.states { // drained: the stream ended
	}
	if rep := call(t, "GET", r.URL+"/v1/events?sku=EV-2", ""); rep.status != 503 || rep.code() != "shutting_down" {
		t.Fatalf("a stream after shutdown began: %d %s", rep.status, rep.raw)
	}
}

// The page and its assets come from the binary.
func TestPageIsServed(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{})[0]
	for path, typ := range map[string]string{"/": "text/html", "/assets/app.js": "text/javascript", "/assets/style.css": "text/css"} {
		rep := call(t, "GET", r.URL+path, "")
		if rep.status != 200 || !strings.HasPrefix(rep.header.Get("Content-Type"), typ) || len(rep.raw) < 200 {
			t.Errorf("%s: %d %s", path, rep.status, rep.header.Get("Content-Type"))
		}
	}
}

// pageBootSeen is the state GET / embeds for the page's script, as a client reads it.
type pageBootSeen struct {
	Products []string        `json:"products"`
	SKU      string          `json:"sku"`
	State    *map[string]any `json:"state"`
}

func bootOf(t *testing.T, html string) pageBootSeen {
	t.Helper()
	const open = `<script type="application/json" id="boot">`
	_, rest, ok := strings.Cut(html, open)
	raw, _, ok2 := strings.Cut(rest, "</script>")
	if !ok || !ok2 {
		t.Fatalf("no boot state in the page: %.300s", html)
	}
	var b pageBootSeen
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		t.Fatalf("the page's boot state %q: %v", raw, err)
	}
	return b
}

// GET / is one answer that holds the page's first frame: its style and script inline, the
// products, and the SKU's state as the database has it, so that the page draws it before any
// stream; with a stream open on the SKU, the stream's latest state, rates and all.
func TestPageIsServedWithItsState(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{})[0]
	resetStock(t, r, "EV-PAGE", 7)
	resetStock(t, r, "EV-PAGE-2", 3)
	for range 2 {
		if rep := buy(t, r, "EV-PAGE", 1, ""); rep.status != 201 {
			t.Fatalf("buy: %d %s", rep.status, rep.raw)
		}
	}
	page := call(t, "GET", r.URL+"/?sku=EV-PAGE", "")
	if page.status != 200 || page.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET /: %d, Cache-Control %q", page.status, page.header.Get("Cache-Control"))
	}
	if strings.Contains(page.raw, `src="/assets`) || strings.Contains(page.raw, `href="/assets`) {
		t.Fatal("the page asks for its assets in other requests: its first frame waits for them")
	}
	b := bootOf(t, page.raw)
	if b.SKU != "EV-PAGE" || b.State == nil || !containsText(strings.Join(b.Products, ","), "EV-PAGE-2") {
		t.Fatalf("boot: %+v", b)
	}
	if s := *b.State; stockOf(s) != 5 || s["audit"].(map[string]any)["units_sold"] != 2.0 || s["rates"] != nil || s["replica"] != "order1" {
		t.Fatalf("the embedded state: %v", s)
	}
	if b := bootOf(t, call(t, "GET", r.URL+"/?sku=NO-SUCH-SKU", "").raw); b.SKU != "NO-SUCH-SKU" || b.State != nil {
		t.Fatalf("an unknown SKU's page: %+v", b)
	}
	if b := bootOf(t, call(t, "GET", r.URL+"/", "").raw); b.SKU != b.Products[0] || b.State == nil {
		t.Fatalf("the page without ?sku=: %+v", b)
	}
	// With a stream open, the page embeds the stream's latest state: measured rates in it.
	s := openStream(t, r.URL+"/v1/events?sku=EV-PAGE")
	s.next(t, 5*time.Second, func(m map[string]any) bool { return m["rates"] != nil })
	if b := bootOf(t, call(t, "GET", r.URL+"/?sku=EV-PAGE", "").raw); b.State == nil || (*b.State)["rates"] == nil {
		t.Fatalf("the page beside an open stream: %+v", b)
	}
}

// A stream's first state is sent as it opens, not at the next change or tick (rateTick, 1 s):
// on a SKU nobody streams (its producer starts and reads at once) and on one already streamed
// (the latest state, at once).
func TestEventsFirstStateAtOnce(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{})[0]
	resetStock(t, r, "EV-FIRST", 4)
	for _, which := range []string{"the first stream", "a second stream"} {
		start := time.Now()
		s := openStream(t, r.URL+"/v1/events?sku=EV-FIRST")
		s.next(t, 5*time.Second, func(m map[string]any) bool { return stockOf(m) == 4 })
		took := time.Since(start)
		t.Logf("%s: its first state %v after the request", which, took.Round(time.Millisecond))
		if took > 900*time.Millisecond {
			t.Fatalf("%s: its first state came %v after the request: it waited for a change or the tick", which, took)
		}
	}
}
