package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
)

// arrivals records when purchases reach the replicas, whichever replica.
type arrivals struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *arrivals) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/orders" {
			a.mu.Lock()
			a.times = append(a.times, time.Now())
			a.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// -rate 200 -duration 2s: 400 purchases reach the replicas, spread over the two seconds (a
// closed loop, or a burst, would have them arrive in a fraction of that); the report's classes
// add up to them; the audit ran and is exact; the buyers after the sell-out are counted apart.
func TestOpenLoopSendsAtTheRate(t *testing.T) {
	var got arrivals
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: time.Millisecond, Wrap: got.wrap})
	jsonPath, mdPath := filepath.Join(t.TempDir(), "r.json"), filepath.Join(t.TempDir(), "r.md")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-targets", targets(rs), "-sku", "OL-1", "-stock", "20", "-rate", "200", "-duration", "2s",
		"-modes", "zk", "-admin-token", ordertest.AdminToken, "-json", jsonPath, "-markdown", mdPath}, &stdout, &stderr)
	t.Logf("table:\n%s", stdout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got.mu.Lock()
	times := slices.Clone(got.times)
	got.mu.Unlock()
	if len(times) != 400 {
		t.Fatalf("%d purchases reached the replicas, want 400 (200/s for 2 s)", len(times))
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	span := times[len(times)-1].Sub(times[0])
	firstSecond := 0
	for _, at := range times {
		if at.Sub(times[0]) < time.Second {
			firstSecond++
		}
	}
	if span < 1700*time.Millisecond || span > 2600*time.Millisecond || firstSecond < 140 || firstSecond > 260 {
		t.Fatalf("the 400 purchases arrived over %v, %d in the first second: want about 2 s, about 200 a second", span, firstSecond)
	}

	rep := readReport(t, jsonPath)
	if len(rep.Rows) != 1 || rep.Rows[0].Open == nil {
		t.Fatalf("rows %+v: want one open-loop row", rep.Rows)
	}
	row, o := rep.Rows[0], rep.Rows[0].Open
	sum := 0
	for _, c := range o.Classes {
		sum += c.Count
	}
	if o.Sends != 400 || row.Requests != 400 || sum != 400 || row.Accepted+row.SoldOut+row.Errors != 400 {
		t.Fatalf("sends %d, requests %d, classes %d, accepted+sold out+errors %d: want 400 each; %+v", o.Sends, row.Requests, sum,
			row.Accepted+row.SoldOut+row.Errors, o.Classes)
	}
	if o.OfferedRPS != 200 || o.SendRPS < 160 || o.SendRPS > 210 {
		t.Fatalf("offered %.0f/s, sent %.1f/s: want 200 and about 200", o.OfferedRPS, o.SendRPS)
	}
	// The audit ran: the stock figures are the database's.
	a, err := rs[0].Store.Audit(context.Background(), "OL-1")
	if err != nil {
		t.Fatal(err)
	}
	if row.InitialStock != 20 || row.FinalStock != a.Stock || row.Orders != a.Orders || row.Accepted != 20 || row.Oversold != 0 || row.LostUpdates != 0 || row.Undersold != 0 {
		t.Fatalf("row %+v against the audit %+v: want 20 sold, exactly", row, a)
	}
	if o.Classes[0].Class != "201" || o.Classes[0].Count != 20 || !o.SoldOut || o.SoldOutAtMS <= 0 || o.SoldOutAtMS > 3000 {
		t.Fatalf("want 20 × 201 first and a sell-out within the run: %+v, sold out %v at %.0f ms", o.Classes, o.SoldOut, o.SoldOutAtMS)
	}
	later := 0
	for _, c := range o.LaterBuyers {
		if c.Class != "409 out_of_stock" {
			t.Errorf("a buyer after the sell-out was told %q (%d times), want 409 out_of_stock", c.Class, c.Count)
		}
		later += c.Count
	}
	// 20 units go to the first buyers of the first 0.1 s or so: most of the 380 others come later.
	answeredAfter := 0
	for _, c := range o.AnsweredAfter {
		answeredAfter += c.Count
	}
	if later < 200 || later > 380 || answeredAfter < later {
		t.Fatalf("%d later buyers, %d answered after the sell-out: want most of the 380 refused", later, answeredAfter)
	}
	// The flash-sale table of this run (as both of its runs, for brevity).
	var table bytes.Buffer
	if code := run(context.Background(), []string{"flash-sale", jsonPath, jsonPath}, &table, &stderr); code != 0 {
		t.Fatalf("flash-sale: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(table.String(), "| zk | 20 sold in ") || !strings.Contains(table.String(), "× `409 out_of_stock` p50 ") {
		t.Errorf("flash-sale table:\n%s", table.String())
	}
	if code := run(context.Background(), []string{"flash-sale", jsonPath}, io.Discard, io.Discard); code != 2 {
		t.Errorf("flash-sale with one report: exit %d, want 2", code)
	}
	md, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| zk | 200 | all | 201 | 20 |", "| came after sell-out | 409 out_of_stock |", "| answered after sell-out | 409 out_of_stock |", "goodput/s"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}
}

// One SKU in zk at WORK_DELAY 40ms sells at most 25 a second; 60 buyers a second for a second
// queue up behind the lock. Counted from the intended send time, each later buyer waits longer
// than the one before: the latency grows with the queue, where a closed loop would see it flat.
func TestOpenLoopLatencyGrowsWithTheQueue(t *testing.T) {
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: 40 * time.Millisecond})
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-targets", targets(rs), "-sku", "OL-2", "-stock", "1000", "-rate", "60", "-duration", "1s",
		"-modes", "zk", "-admin-token", ordertest.AdminToken, "-json", jsonPath}, &stdout, &stderr)
	t.Logf("table:\n%s", stdout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	o := readReport(t, jsonPath).Rows[0].Open
	if len(o.Timeline) < 10 {
		t.Fatalf("timeline %+v: want a point per slice of the run", o.Timeline)
	}
	// The early buyers' baseline is the fastest of the first quarter's slices: a stall of the
	// shared machine (a ZooKeeper fsync) can hold the very first slice, and is not the queue.
	early, last := o.Timeline[0].P50, o.Timeline[len(o.Timeline)-1]
	for _, p := range o.Timeline[:len(o.Timeline)/4] {
		early = min(early, p.P50)
	}
	t.Logf("p50 of the early buyers %.0f ms, of the last's %.0f ms", early, last.P50)
	// The last buyers come after 60 purchases of which at most 25 can have been served: they
	// wait for at least the other 35, 35 × 40 ms.
	if last.P50 < 1000 || last.P50 < 4*early {
		t.Fatalf("timeline %+v: want the last buyers' latency well above the first's, and above a second", o.Timeline)
	}
	if o.SendLagP99 > 200 {
		t.Logf("the generator fell behind its schedule by %.0f ms (p99): the machine is busy; it counts in the latencies", o.SendLagP99)
	}
}

// An open-loop sweep steps each mode through the rates, with stock for every purchase whatever
// -stock says (a sweep measures capacity, not a sell-out), and draws goodput and p99 against the
// offered rate.
func TestSweep(t *testing.T) {
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: 2 * time.Millisecond})
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-targets", targets(rs), "-sku", "OL-3", "-stock", "1", "-sweep", "-sweep-rates", "20,80", "-duration", "1s",
		"-modes", "zk,db-cas", "-admin-token", ordertest.AdminToken, "-json", jsonPath, "-html", htmlPath}, &stdout, &stderr)
	t.Logf("table:\n%s", stdout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rep := readReport(t, jsonPath)
	var steps []string
	for _, row := range rep.Rows {
		steps = append(steps, fmt.Sprintf("%s@%.0f", row.Mode, row.Open.OfferedRPS))
		if row.InitialStock < int64(row.Open.Sends) || row.Open.SoldOut || row.SoldOut != 0 || row.Oversold != 0 || row.LostUpdates != 0 {
			t.Errorf("%s at %.0f/s: want stock for every purchase, none sold out, exact: %+v", row.Mode, row.Open.OfferedRPS, row)
		}
	}
	if want := []string{"zk@20", "zk@80", "db-cas@20", "db-cas@80"}; !slices.Equal(steps, want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	html, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Goodput against offered load", "p99 against offered load", "<svg"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("the HTML report lacks %q", want)
		}
	}
}

// Bad combinations of the open loop's flags give the usage message, exit 2.
func TestOpenLoopUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-rate", "-5"},
		{"-rate", "x"},
		{"-sweep"},
		{"-sweep-rates", "10,20"},
		{"-sweep", "-sweep-rates", "10,0"},
		{"-sweep", "-sweep-rates", "10,ten"},
		{"-sweep", "-rate", "100", "-sweep-rates", "10,20"},
		{"-rate", "100", "-concurrency", "10"},
		{"-rate", "100", "-requests", "10"},
		{"-duration", "5s"},
		{"-rate", "100", "-duration", "0s"},
		{"-rate", "100", "-duration", "-1s"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, io.Discard, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if msg, _, _ := strings.Cut(stderr.String(), "usage: loadtest"); !strings.Contains(stderr.String(), "usage: loadtest") || !strings.Contains(msg, "-") {
			t.Errorf("%v: no usage message naming the flag: %s", args, stderr.String())
		}
	}
}
