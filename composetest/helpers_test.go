package composetest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/loadtest"
)

// The compose file publishes the replicas on these ports.
var replicas = []string{"http://127.0.0.1:8081", "http://127.0.0.1:8082", "http://127.0.0.1:8083"}

// adminToken is the replicas' admin token, from the file scripts/secrets.sh wrote (newStack runs
// it) and the compose file mounts as ADMIN_TOKEN_FILE.
var adminToken string

func reset(t testing.TB, sku string, stock int) {
	t.Helper()
	if st, m := call(t, http.MethodPut, replicas[0]+"/admin/products/"+sku, fmt.Sprintf(`{"stock":%d}`, stock),
		"Authorization", "Bearer "+adminToken); st != http.StatusOK {
		t.Fatalf("reset %s: %d %v", sku, st, m)
	}
}

func setMode(t testing.TB, mode string, urls ...string) {
	t.Helper()
	for _, u := range urls {
		if st, m := call(t, http.MethodPut, u+"/admin/lock-mode", fmt.Sprintf(`{"mode":%q}`, mode),
			"Authorization", "Bearer "+adminToken); st != http.StatusOK {
			t.Fatalf("lock mode %s on %s: %d %v", mode, u, st, m)
		}
	}
}

type audit struct {
	Stock, Orders, UnitsSold, Oversold, LostUpdates int64
}

func auditOf(t testing.TB, url, sku string) audit {
	t.Helper()
	st, m := call(t, http.MethodGet, url+"/v1/products/"+sku+"/audit", "")
	if st != http.StatusOK {
		t.Fatalf("audit %s on %s: %d %v", sku, url, st, m)
	}
	n := func(k string) int64 { f, _ := m[k].(float64); return int64(f) }
	return audit{n("stock"), n("orders"), n("units_sold"), n("oversold"), n("lost_updates")}
}

type queueEntry struct {
	Node, Owner string
	Token       int64
	Holder      bool
}

func queueOf(t testing.TB, url, sku string) []queueEntry {
	t.Helper()
	st, m := call(t, http.MethodGet, url+"/v1/products/"+sku+"/lock", "")
	if st != http.StatusOK {
		t.Fatalf("lock queue of %s on %s: %d %v", sku, url, st, m)
	}
	raw, _ := m["queue"].([]any)
	var q []queueEntry
	for _, e := range raw {
		em, _ := e.(map[string]any)
		node, _ := em["node"].(string)
		owner, _ := em["owner"].(string)
		holder, _ := em["holder"].(bool)
		token, _ := em["token"].(float64)
		q = append(q, queueEntry{node, owner, int64(token), holder})
	}
	return q
}

// orderWithToken finds the SKU's order written under a fencing token, if any: the orders come in
// pages of 500 through GET /v1/products/:sku/orders.
func orderWithToken(t testing.TB, url, sku string, token int64) (map[string]any, bool) {
	t.Helper()
	after := "0"
	for {
		st, m := call(t, http.MethodGet, fmt.Sprintf("%s/v1/products/%s/orders?limit=500&after=%s", url, sku, after), "")
		if st != http.StatusOK {
			t.Fatalf("orders of %s: %d %v", sku, st, m)
		}
		orders, _ := m["orders"].([]any)
		for _, o := range orders {
			om, _ := o.(map[string]any)
			if tok, _ := om["fence_token"].(float64); int64(tok) == token {
				return om, true
			}
		}
		next, ok := m["next_after"].(float64)
		if !ok {
			return nil, false
		}
		after = fmt.Sprint(int64(next))
	}
}

// ordersCounter reads zkstock_orders_total{result=...} from a replica's /metrics.
func ordersCounter(t testing.TB, url, result string) float64 {
	t.Helper()
	resp, err := httpClient.Get(url + "/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", url, err)
	}
	defer resp.Body.Close()
	want := fmt.Sprintf(`zkstock_orders_total{result=%q} `, result)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metrics of %s: %q: %v", url, sc.Text(), err)
			}
			return f
		}
	}
	return 0
}

// waitFor polls cond until it holds or the time is up.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// load is a loadtest run in the background.
type load struct {
	start time.Time
	done  chan struct{}
	rep   *loadtest.Report
	err   error
}

type quiet struct{}

func (quiet) Start(string, int) {}
func (quiet) Add(int)           {}
func (quiet) Finish()           {}

func startLoad(t testing.TB, cfg loadtest.Config) *load {
	t.Helper()
	cfg.Targets, cfg.AdminToken = replicas, adminToken
	if cfg.Qty == 0 {
		cfg.Qty = 1
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	l := &load{start: time.Now(), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		l.rep, l.err = loadtest.Run(ctx, cfg, quiet{})
	}()
	return l
}

func (l *load) wait(t testing.TB) []loadtest.Row {
	t.Helper()
	<-l.done
	if l.err != nil {
		t.Fatalf("load: %v", l.err)
	}
	return l.rep.Rows
}

// exact fails unless the row's stock is what its orders say, with nothing left to sell.
func exact(t testing.TB, row loadtest.Row, stock int64) {
	t.Helper()
	if row.Oversold != 0 || row.LostUpdates != 0 || row.Undersold != 0 || row.FinalStock != 0 || row.Orders != stock || row.UnitsSold != stock {
		t.Fatalf("mode %s is not exact: %+v", row.Mode, summary(row))
	}
}

func summary(row loadtest.Row) string {
	return fmt.Sprintf("mode %s: %d requests, %d accepted, %d sold out, %d errors %v, %d failovers; stock %d → %d, %d orders, oversold %d, lost updates %d, undersold %d; %.0f req/s, p99 %.0f ms, max %.0f ms",
		row.Mode, row.Requests, row.Accepted, row.SoldOut, row.Errors, row.ErrorCodes, row.Failovers, row.InitialStock, row.FinalStock,
		row.Orders, row.Oversold, row.LostUpdates, row.Undersold, row.Throughput, row.P99, row.Max)
}

// longestGap is the longest time between two sales, and when it began (since the load started).
func longestGap(row loadtest.Row) (gap, at time.Duration) {
	for i := 1; i < len(row.Sales); i++ {
		d := time.Duration((row.Sales[i].AtMillis - row.Sales[i-1].AtMillis) * float64(time.Millisecond))
		if d > gap {
			gap, at = d, time.Duration(row.Sales[i-1].AtMillis*float64(time.Millisecond))
		}
	}
	return gap, at
}

// results collects one line per scenario into out/compose-results.md, for docs/reliability.md (On Docker) and the notes.
var results struct {
	sync.Mutex
	lines []string
}

func record(t testing.TB, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	results.Lock()
	defer results.Unlock()
	results.lines = append(results.lines, fmt.Sprintf("| %s | %s |", t.Name(), line))
	root := repoRoot(t)
	if err := os.MkdirAll(filepath.Join(root, "out"), 0o755); err != nil {
		t.Errorf("out: %v", err)
		return
	}
	body := "| scenario | result |\n| --- | --- |\n" + strings.Join(results.lines, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(root, "out", "compose-results.md"), []byte(body), 0o644); err != nil {
		t.Errorf("results: %v", err)
	}
}
