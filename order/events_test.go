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
