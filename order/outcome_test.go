package order_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/order"
)

// behindDBProxy starts one replica whose database connections go through a proxy that can lose
// the COMMIT's reply; the returned store reads the same database directly.
func behindDBProxy(t *testing.T, mode order.LockMode) (*replica, *tcpproxy.Proxy, *inventory.Store) {
	t.Helper()
	dsn := testenv.MySQLDatabase(t)
	proxy, proxied := tcpproxy.ProxiedDSN(t, dsn, nil)
	r := ordertest.Start(t, 1, ordertest.Options{Mode: mode, DSN: proxied})[0]
	direct, err := inventory.Open(context.Background(), dsn, inventory.PoolOptions{MaxOpen: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	return r, proxy, direct
}

func isCommit(q string) bool { return strings.EqualFold(q, "COMMIT") }

func directAudit(t *testing.T, s *inventory.Store, sku string) inventory.Audit {
	t.Helper()
	a, err := s.Audit(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The database commits the purchase, and its reply is lost with the connection. The service asks
// the database before it answers, learns that the sale was made, and says so: 201, with the key
// it made for the purchase in the header and the body.
func TestCommitAppliedReplyLost(t *testing.T) {
	for _, mode := range []order.LockMode{order.ModeZK, order.ModeZKBatch, order.ModeDBCAS} {
		t.Run(string(mode), func(t *testing.T) {
			r, proxy, direct := behindDBProxy(t, mode)
			resetStock(t, r, "OUT-1", 10)
			const unanswered = `zkstock_commits_unanswered_total{sku="OUT-1"}`
			if n := metricValue(t, r, unanswered); n != 0 {
				t.Fatalf("%s %d before any COMMIT was lost", unanswered, n)
			}
			proxy.CutAfterQuery(isCommit, false)
			rep := buy(t, r, "OUT-1", 1, "")
			if n := metricValue(t, r, unanswered); n != 1 {
				t.Errorf("%s %d after one COMMIT's reply was lost, want 1", unanswered, n)
			}
			key, _ := rep.body["request_id"].(string)
			if rep.status != 201 || !strings.HasPrefix(key, "gen-") || rep.header.Get("Idempotency-Key") != key {
				t.Fatalf("want 201 with the made key in body and header: %d %s %v", rep.status, rep.raw, rep.header)
			}
			if a := directAudit(t, direct, "OUT-1"); a.Orders != 1 || a.Stock != 9 {
				t.Fatalf("audit %+v", a)
			}
			if got := call(t, "GET", r.URL+"/v1/orders?request_id="+url.QueryEscape(key), ""); got.status != 200 || got.orderID() != rep.orderID() {
				t.Fatalf("look-up by key: %d %s", got.status, got.raw)
			}
			if rep := buy(t, r, "OUT-1", 1, ""); rep.status != 201 {
				t.Fatalf("a purchase after the proxy healed: %d %s", rep.status, rep.raw)
			}
			if n := metricValue(t, r, unanswered); n != 1 {
				t.Errorf("%s %d after a COMMIT answered, want still 1", unanswered, n)
			}
		})
	}
}

// The database commits, and then cannot be reached at all for longer than the service may spend
// asking. The service does not claim that nothing was sold: 503 outcome_unknown, naming the key.
// Once the database is back, the key finds the order, and a retry with it sells nothing twice.
func TestCommitOutcomeUnknown(t *testing.T) {
	r, proxy, direct := behindDBProxy(t, order.ModeZK)
	resetStock(t, r, "OUT-2", 10)
	proxy.CutAfterQuery(isCommit, true)
	rep := buy(t, r, "OUT-2", 1, "client-key-1")
	if rep.status != 503 || rep.code() != "outcome_unknown" || rep.body["request_id"] != "client-key-1" ||
		!strings.Contains(rep.raw, "GET /v1/orders?request_id=") || strings.Contains(rep.raw, "nothing was sold") {
		t.Fatalf("want 503 outcome_unknown naming the key: %d %s", rep.status, rep.raw)
	}
	if a := directAudit(t, direct, "OUT-2"); a.Orders != 1 || a.Stock != 9 {
		t.Fatalf("the commit was applied, audit %+v", a)
	}
	proxy.Restore()
	if got := call(t, "GET", r.URL+"/v1/orders?request_id=client-key-1", ""); got.status != 200 {
		t.Fatalf("look-up by key after the outage: %d %s", got.status, got.raw)
	}
	if again := buy(t, r, "OUT-2", 1, "client-key-1"); again.status != 200 || again.body["replayed"] != true {
		t.Fatalf("retry with the key: %d %s", again.status, again.raw)
	}
	if a := directAudit(t, direct, "OUT-2"); a.Orders != 1 || a.Stock != 9 {
		t.Fatalf("sold twice: %+v", a)
	}
}

// The COMMIT never reaches the database: the connection dies before it. The service asks, learns
// that nothing was committed, and only then says so.
func TestCommitNeverArrived(t *testing.T) {
	for _, mode := range []order.LockMode{order.ModeZK, order.ModeZKBatch} {
		t.Run(string(mode), func(t *testing.T) {
			r, proxy, direct := behindDBProxy(t, mode)
			resetStock(t, r, "OUT-3", 10)
			proxy.DropQuery(isCommit)
			rep := buy(t, r, "OUT-3", 1, "")
			if rep.status != 503 || rep.code() != "storage_unavailable" || !strings.Contains(rep.raw, "nothing was sold") || rep.body["request_id"] == nil {
				t.Fatalf("want 503 storage_unavailable, nothing sold, with the key: %d %s", rep.status, rep.raw)
			}
			if a := directAudit(t, direct, "OUT-3"); a.Orders != 0 || a.Stock != 10 {
				t.Fatalf("audit %+v", a)
			}
		})
	}
}

// In zk-batch, a client that hangs up after a batch has taken its purchase is not counted as
// "nothing was sold": the batch sells it, and the replica records the sale as made.
func TestBatchClientLeavesAfterItsPurchaseWasTaken(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{Mode: order.ModeZKBatch, WorkDelay: time.Second})[0]
	resetStock(t, r, "OUT-4", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", r.URL+"/v1/orders", strings.NewReader(`{"sku":"OUT-4","qty":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %d within 300 ms; the work takes 1 s", resp.StatusCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for auditOf(t, r, "OUT-4").Orders != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the batch did not sell the purchase: %+v", auditOf(t, r, "OUT-4"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	metrics := call(t, "GET", r.URL+"/metrics", "").raw
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(metrics, `zkstock_orders_total{result="created"} 1`); {
		if time.Now().After(deadline) {
			t.Fatalf("the sale is not counted as created:\n%s", grepLines(metrics, "zkstock_orders_total"))
		}
		time.Sleep(50 * time.Millisecond)
		metrics = call(t, "GET", r.URL+"/metrics", "").raw
	}
	if strings.Contains(metrics, `result="client_closed"`) {
		t.Fatalf("counted as client_closed:\n%s", grepLines(metrics, "zkstock_orders_total"))
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The look-up of a client's key before the lock only spares a retry the lock. When the database
// drops it, the purchase (and the cart) goes on, the locked deduction checks the key again, and
// a retry under the key is a replay: sold once.
func TestKeyLookupBeforeTheLockFails(t *testing.T) {
	r, proxy, direct := behindDBProxy(t, order.ModeZK)
	resetStock(t, r, "OUT-6", 10)
	resetStock(t, r, "OUT-7", 10)
	for _, tc := range []struct {
		key string
		buy func() reply
	}{
		{"lookup-one", func() reply { return buy(t, r, "OUT-6", 1, "lookup-one") }},
		{"lookup-cart", func() reply { return buyCart(t, r, "lookup-cart", "OUT-6", 1, "OUT-7", 1) }},
	} {
		var dropped atomic.Bool
		proxy.DropQuery(func(q string) bool {
			if strings.Contains(q, tc.key) {
				dropped.Store(true)
				return true
			}
			return false
		})
		if rep := tc.buy(); rep.status != 201 || !dropped.Load() {
			t.Fatalf("%s: %d %s (look-up dropped: %v), want 201", tc.key, rep.status, rep.raw, dropped.Load())
		}
		if again := tc.buy(); again.status != 200 || again.body["replayed"] != true {
			t.Fatalf("%s again: %d %s", tc.key, again.status, again.raw)
		}
	}
	if a, b := directAudit(t, direct, "OUT-6"), directAudit(t, direct, "OUT-7"); a.Orders != 2 || a.Stock != 8 || b.Orders != 1 || b.Stock != 9 {
		t.Fatalf("sold other than once each: %+v %+v", a, b)
	}
}

// The database commits the purchase and its reply is lost; before the service can look the key
// up, another replica sells from the same SKU. The answer says the sale was made, and the stock it
// gives is the stock right after this sale, not the stock at the look-up: a client (or a checker)
// that reads "remaining" as this purchase's effect must not see the other sale in it. Found by
// the nemesis (redis-fenced seed 302, 30 minutes: a purchase answered with the stock after a later
// cancellation made the history not linearizable, while the audit stayed exact).
func TestCommitAppliedReplyLostAnswersTheStockItLeft(t *testing.T) {
	for _, mode := range []order.LockMode{order.ModeZK, order.ModeZKBatch, order.ModeDBCAS} {
		t.Run(string(mode), func(t *testing.T) {
			r, proxy, direct := behindDBProxy(t, mode)
			const sku = "OUT-LEFT"
			resetStock(t, r, sku, 10)
			rep := sellElsewhereWhileTheReplyIsLost(t, proxy, direct, sku, func() reply { return buy(t, r, sku, 1, "left-1") },
				func() bool { return directAudit(t, direct, sku).Orders == 1 })
			if rep.status != 201 || rep.body["remaining"] != float64(9) || rep.body["replayed"] != false {
				t.Fatalf("want 201 with the stock this sale left (9), not the stock at the look-up (6): %d %s", rep.status, rep.raw)
			}
			if a := directAudit(t, direct, sku); a.Orders != 2 || a.Stock != 6 {
				t.Fatalf("audit %+v", a)
			}
		})
	}
}

// A cancellation whose COMMIT's reply is lost is answered with the stock right after it too.
func TestCancelAppliedReplyLostAnswersTheStockItLeft(t *testing.T) {
	r, proxy, direct := behindDBProxy(t, order.ModeZK)
	const sku = "OUT-LEFT-C"
	resetStock(t, r, sku, 10)
	bought := buy(t, r, sku, 1, "left-c")
	if bought.status != 201 {
		t.Fatalf("buy: %d %s", bought.status, bought.raw)
	}
	rep := sellElsewhereWhileTheReplyIsLost(t, proxy, direct, sku, func() reply { return cancelOrder(t, r, bought) }, func() bool {
		o, _, err := direct.OrderByID(context.Background(), bought.orderID())
		return err == nil && o.CancelledAt != nil
	})
	if rep.status != 200 || rep.body["remaining"] != float64(10) || rep.body["replayed"] != false {
		t.Fatalf("want 200 with the stock this cancellation left (10), not the stock at the look-up (7): %d %s", rep.status, rep.raw)
	}
}

// sellElsewhereWhileTheReplyIsLost sends change with its COMMIT's reply lost and the database out
// of the replica's reach, waits until applied sees the change in the database, sells 3 units of
// sku as another replica would (straight to the database), then lets the replica learn the
// outcome, and returns its answer.
func sellElsewhereWhileTheReplyIsLost(t *testing.T, proxy *tcpproxy.Proxy, direct *inventory.Store, sku string, change func() reply, applied func() bool) reply {
	t.Helper()
	proxy.CutAfterQuery(isCommit, true)
	answered := make(chan reply, 1)
	go func() { answered <- change() }()
	for deadline := time.Now().Add(10 * time.Second); !applied(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the COMMIT never reached the database")
		}
	}
	if _, err := direct.Deduct(context.Background(), inventory.Purchase{SKU: sku, Qty: 3, RequestID: sku + "-other", Replica: "other"},
		inventory.CAS, inventory.Hooks{}); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	return <-answered
}
