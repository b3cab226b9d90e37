package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/loadtest"
)

func TestMain(m *testing.M) { testenv.Main(m, "ZK_SERVERS", "MYSQL_DSN") }

// readReport reads the JSON report a run wrote.
func readReport(t *testing.T, path string) loadtest.Report {
	t.Helper()
	var rep loadtest.Report
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func targets(rs []*ordertest.Replica) string {
	urls := make([]string, len(rs))
	for i, r := range rs {
		urls[i] = r.URL
	}
	return strings.Join(urls, ",")
}

func TestComparesNoneAndZK(t *testing.T) {
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: 5 * time.Millisecond})
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-targets", targets(rs), "-sku", "LT-1", "-stock", "20", "-requests", "200",
		"-concurrency", "50", "-modes", "none,zk", "-admin-token", ordertest.AdminToken, "-json", jsonPath, "-html", htmlPath}, &stdout, &stderr)
	t.Logf("table:\n%s", stdout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rep := readReport(t, jsonPath)
	if len(rep.Rows) != 2 || rep.Rows[0].Mode != "none" || rep.Rows[1].Mode != "zk" {
		t.Fatalf("rows %+v", rep.Rows)
	}
	none, zk := rep.Rows[0], rep.Rows[1]
	if none.Oversold == 0 && none.LostUpdates == 0 {
		t.Fatalf("mode none reported no oversell and no lost update: %+v", none)
	}
	if zk.Oversold != 0 || zk.LostUpdates != 0 || zk.Undersold != 0 || zk.FinalStock != 0 || zk.Accepted != 20 || zk.SoldOut != 180 || zk.Errors != 0 {
		t.Fatalf("mode zk is not exact: %+v", zk)
	}
	// The report's last row is what the database says now.
	a, err := rs[0].Store.Audit(context.Background(), "LT-1")
	if err != nil {
		t.Fatal(err)
	}
	if a.Stock != zk.FinalStock || a.Orders != zk.Orders || a.UnitsSold != zk.UnitsSold || a.InitialStock != zk.InitialStock || int64(zk.Accepted) != a.Orders {
		t.Fatalf("JSON %+v does not match the audit %+v", zk, a)
	}
	if rep.Command == "" || rep.Machine.CPUs == 0 || rep.Date == "" {
		t.Fatalf("report lacks how to reproduce it: %q %+v %q", rep.Command, rep.Machine, rep.Date)
	}
	for _, want := range []string{"oversold", "lost updates", "none", "zk"} {
		if !strings.Contains(stdout.String(), want) {
			t.Fatalf("table lacks %q", want)
		}
	}
	html, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "mode none: stock and sales", "mode zk: stock and sales", "Latency by percentile"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Fatalf("HTML report lacks %q", want)
		}
	}
	for _, banned := range []string{"<script src", "http://", "https://", "<link"} {
		if bytes.Contains(bytes.ReplaceAll(html, []byte(`xmlns="http://www.w3.org/2000/svg"`), nil), []byte(banned)) {
			t.Fatalf("HTML report is not self-contained: it has %q", banned)
		}
	}
	if os.Getenv("LOADTEST_REPORT_OUT") != "" {
		_ = os.WriteFile(os.Getenv("LOADTEST_REPORT_OUT"), html, 0o644)
	}
}

// A replica set that stays in mode none while claiming to switch (and to run zk when asked): the
// check must catch it.
func TestFailsWhenALockedModeOversells(t *testing.T) {
	liar := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/admin/lock-mode" {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"mode":"zk"}`))
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	rs := ordertest.Start(t, 3, ordertest.Options{Mode: "none", WorkDelay: 5 * time.Millisecond, Wrap: liar})
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-targets", targets(rs), "-sku", "LT-2", "-stock", "20", "-requests", "200",
		"-concurrency", "50", "-modes", "zk", "-admin-token", ordertest.AdminToken}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "mode zk is not exact") {
		t.Fatalf("stderr does not say why: %s", stderr.String())
	}
}

// One replica sells and then its reply is lost (the connection closes before a byte of it is sent).
// The load generator tries the next replica with the same Idempotency-Key, learns that the order
// was made, and counts it: every unit sold is known to the client and none is sold twice.
func TestFailsOverWhenAReplyIsLost(t *testing.T) {
	var wrapped, lost atomic.Int32
	loseReplies := func(h http.Handler) http.Handler {
		if wrapped.Add(1) != 1 {
			return h // only the first replica misbehaves
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || r.URL.Path != "/v1/orders" {
				h.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			lost.Add(1)
			_ = conn.Close()
		})
	}
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: time.Millisecond, Wrap: loseReplies})
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "r.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-targets", targets(rs), "-sku", "LT-3", "-stock", "20", "-requests", "90",
		"-concurrency", "9", "-modes", "zk", "-admin-token", ordertest.AdminToken, "-json", jsonPath}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rep := readReport(t, jsonPath)
	zk := rep.Rows[0]
	t.Logf("replies lost: %d; row: accepted %d, sold out %d, errors %d, failovers %d, orders %d", lost.Load(),
		zk.Accepted, zk.SoldOut, zk.Errors, zk.Failovers, zk.Orders)
	// Purchases 0, 3, 6, ... go to the first replica first: each of those 30 goes on to the next.
	if lost.Load() < 30 || zk.Failovers != 30 {
		t.Fatalf("%d replies lost, %d failovers, want 30: every purchase that lost its reply is retried elsewhere, once", lost.Load(), zk.Failovers)
	}
	if zk.Accepted != 20 || zk.Orders != 20 || zk.SoldOut != 70 || zk.Errors != 0 || zk.Oversold != 0 {
		t.Fatalf("want all 20 sales known to the client and 70 sold out: %+v", zk)
	}
}

// -cancel-ratio cancels a share of the accepted orders during the load: in zk the audit is exact
// with the restocks in the mix; in none the report shows what the race did.
func TestCancelRatio(t *testing.T) {
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: 2 * time.Millisecond})
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-targets", targets(rs), "-sku", "LT-4", "-stock", "60", "-requests", "200",
		"-concurrency", "30", "-modes", "none,zk", "-cancel-ratio", "0.25", "-admin-token", ordertest.AdminToken, "-json", jsonPath}, &stdout, &stderr)
	t.Logf("table:\n%s", stdout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rep := readReport(t, jsonPath)
	zk := rep.Rows[1]
	if zk.Cancelled != int(float64(zk.Accepted)*0.25) || zk.CancelErrors != 0 || zk.UnitsRestocked != int64(zk.Cancelled) || zk.Oversold != 0 || zk.LostUpdates != 0 ||
		zk.Undersold != 0 || int64(zk.Accepted) != zk.Orders+int64(zk.Cancelled) || zk.FinalStock != 60-zk.UnitsSold {
		t.Fatalf("zk with cancellations is not exact: %+v", zk)
	}
	if !strings.Contains(stdout.String(), "zk: ") || !strings.Contains(stdout.String(), "orders cancelled during the load") {
		t.Fatalf("the table does not report the cancellations:\n%s", stdout.String())
	}
	for _, args := range [][]string{{"-cancel-ratio", "-0.1"}, {"-cancel-ratio", "1.5"}, {"-cancel-ratio", "x"}} {
		if code := run(context.Background(), args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// -cart 3 sells carts of three SKUs, each listed in an order of its own: zk is exact on every
// SKU, and the row sums them.
func TestCarts(t *testing.T) {
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: 2 * time.Millisecond})
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-targets", targets(rs), "-sku", "LT-5", "-stock", "20", "-requests", "90",
		"-concurrency", "30", "-modes", "zk,db-cas", "-cart", "3", "-cancel-ratio", "0.1", "-admin-token", ordertest.AdminToken, "-json", jsonPath}, &stdout, &stderr)
	t.Logf("table:\n%s", stdout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rep := readReport(t, jsonPath)
	standing := 0
	for _, row := range rep.Rows {
		// Every cart that stands is 3 orders, one per SKU, whatever was cancelled on the way. The
		// stock need not end at 0: a cancellation late in the load restocks after the last
		// purchase has been answered sold out.
		standing = row.Accepted - row.Cancelled
		if row.InitialStock != 60 || row.Orders != int64(3*standing) || row.FinalStock != 60-row.UnitsSold || row.Oversold != 0 ||
			row.LostUpdates != 0 || row.Undersold != 0 || row.Errors != 0 || row.Cancelled != int(float64(row.Accepted)*0.1) || row.Cancelled == 0 || standing < 20-row.Cancelled {
			t.Fatalf("%s with carts of 3 is not exact: %+v", row.Mode, row)
		}
	}
	for _, sku := range []string{"LT-5", "LT-5-2", "LT-5-3"} { // as the last mode (db-cas) left them
		if a, err := rs[0].Store.Audit(context.Background(), sku); err != nil || a.UnitsSold != int64(standing) || a.Stock != 20-a.UnitsSold {
			t.Fatalf("%s: %+v %v, want %d units sold", sku, a, err, standing)
		}
	}
	if code := run(context.Background(), []string{"-cart", "21"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("-cart 21: exit %d, want 2", code)
	}
}

// A catalogue of 40 products with a Zipf-skewed load: the hot head sells out, the tail does not,
// and zk is exact on every one; the row sums them.
func TestCatalogue(t *testing.T) {
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: time.Millisecond})
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-targets", targets(rs), "-sku", "LT-6", "-stock", "5", "-requests", "300",
		"-concurrency", "30", "-modes", "none,zk", "-skus", "40", "-dist", "zipf", "-zipf-s", "1.3",
		"-admin-token", ordertest.AdminToken, "-json", jsonPath}, &stdout, &stderr)
	t.Logf("table:\n%s", stdout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rep := readReport(t, jsonPath)
	zk := rep.Rows[1]
	if zk.SKUs != 40 || zk.InitialStock != 200 || zk.Oversold != 0 || zk.LostUpdates != 0 || zk.Undersold != 0 ||
		zk.FinalStock != 200-zk.UnitsSold || zk.SoldOut == 0 || zk.WorstSKU != "" || int64(zk.Accepted) != zk.Orders {
		t.Fatalf("zk over a catalogue is not exact: %+v", zk)
	}
	head, err := rs[0].Store.Audit(context.Background(), "LT-6")
	if err != nil || head.Stock != 0 {
		t.Fatalf("the hottest product did not sell out: %+v %v", head, err)
	}
	tail, err := rs[0].Store.Audit(context.Background(), "LT-6-40")
	if err != nil || tail.Stock == 0 {
		t.Fatalf("the coldest product sold out: %+v %v", tail, err)
	}
	if !strings.Contains(stdout.String(), "zk: 40 SKUs, figures summed over them; none is off") {
		t.Fatalf("the table does not say how many SKUs:\n%s", stdout.String())
	}
	for _, args := range [][]string{{"-skus", "0"}, {"-dist", "pareto"}, {"-dist", "zipf", "-zipf-s", "1"}} {
		if code := run(context.Background(), args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-requests", "0"}, {"-targets", "ftp://x"}, {"-modes", ""}, {"-concurrency", "x"}, {"stray"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if !strings.Contains(stderr.String(), "usage: loadtest") {
			t.Errorf("%v: no usage message: %s", args, stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, io.Discard, &stderr); code != 0 || !strings.Contains(stderr.String(), "-modes") {
		t.Errorf("-h: exit %d, %s", code, stderr.String())
	}
}

func TestLocksSubcommand(t *testing.T) {
	dir := t.TempDir()
	md, svg := filepath.Join(dir, "locks.md"), filepath.Join(dir, "locks.svg")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"locks", "-zk-servers", strings.Join(testenv.ZKServers(t), ","), "-contenders", "1,8",
		"-acquisitions", "60", "-hold", "2ms", "-markdown", md, "-svg", svg}, &stdout, &stderr)
	t.Logf("table:\n%s", stdout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	table, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	// One row per recipe and contender count.
	for _, v := range []string{"spin", "node-watch", "herd", "fair", "zklock"} {
		if n := strings.Count(string(table), "| "+v+" |"); n != 2 {
			t.Fatalf("%s has %d rows in\n%s", v, n, table)
		}
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Fatalf("svg: %v", err)
	}
	if code := run(context.Background(), []string{"locks", "-variants", "bogus"}, io.Discard, &stderr); code != 2 {
		t.Fatalf("unknown variant: exit %d", code)
	}
}

// loadtest switches: the fleet's mode switched under load through random replicas, each switch
// timed; every switch is written (the final version counts them) and no update is lost.
func TestSwitchesUnderLoad(t *testing.T) {
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: 2 * time.Millisecond})
	jsonPath := filepath.Join(t.TempDir(), "s.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"switches", "-targets", targets(rs), "-n", "6", "-pause", "100ms", "-modes", "zk,db-cas,zk-batch",
		"-admin-token", ordertest.AdminToken, "-json", jsonPath}, &stdout, &stderr)
	t.Logf("table:\n%s", stdout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep loadtest.SwitchReport
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.FinalVersion != 6 || rep.Purchases == 0 || rep.MaxMS <= 0 || rep.Audit.LostUpdates != 0 {
		t.Fatalf("report %+v: want 6 switches written, purchases made and none lost", rep)
	}
	if code := run(context.Background(), []string{"switches", "-modes", "zk"}, io.Discard, &stderr); code != 2 {
		t.Fatalf("one mode to switch between: exit %d, want 2 (usage)", code)
	}
}
