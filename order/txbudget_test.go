package order_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/order"
)

// isStockWrite is the statement that writes a product's stock after its read.
func isStockWrite(q string) bool {
	return strings.HasPrefix(q, "UPDATE products SET lost_high")
}

// A change whose database stalls in the middle of its transaction, before its COMMIT, is given
// up on at its deadline (LOCK_TIMEOUT and the transaction budget after it arrived), not after the
// connection's read timeout (here 40 s) or the server's idle timeout (10 s): no COMMIT was sent,
// so the answer says truly that nothing was sold, the audit shows nothing sold, and the SKUs'
// locks are free for the next buyer. A single purchase (its pipelined transaction) and a cart (a
// transaction of statements one by one).
func TestStalledTransactionEndsAtTheChangeDeadline(t *testing.T) {
	const (
		lockTimeout = 2 * time.Second
		statements  = 5 * time.Second // the transaction budget's part for statements, WORK_DELAY 0
		slack       = 2 * time.Second
	)
	for _, c := range []struct {
		name string
		buy  func(t *testing.T, r *ordertest.Replica, key string) reply
		skus []string
	}{
		{"purchase", func(t *testing.T, r *ordertest.Replica, key string) reply { return buy(t, r, "STALL-P", 1, key) }, []string{"STALL-P"}},
		{"cart", func(t *testing.T, r *ordertest.Replica, key string) reply {
			return buyCart(t, r, key, "STALL-C1", 1, "STALL-C2", 1)
		}, []string{"STALL-C1", "STALL-C2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := testenv.MySQLDatabase(t)
			proxy, proxied := tcpproxy.ProxiedDSN(t, dsn, func(c *mysql.Config) { c.ReadTimeout = 40 * time.Second })
			stalled := ordertest.Start(t, 1, ordertest.Options{Mode: order.ModeZK, DSN: proxied, LockTimeout: lockTimeout})[0]
			next := ordertest.Start(t, 1, ordertest.Options{Mode: order.ModeZK, DSN: dsn, FirstNumber: 2, LockTimeout: lockTimeout})[0]
			for _, sku := range c.skus {
				resetStock(t, next, sku, 10)
			}
			waitForFleet(t, next, 2)

			fired := proxy.StallAtQuery(isStockWrite)
			answers := make(chan reply, 1)
			start := time.Now()
			go func() { answers <- c.buy(t, stalled, "K-STALLED") }()
			var rep reply
			select {
			case <-fired:
				rep = <-answers
			case rep = <-answers:
				t.Fatalf("answered before its transaction stalled: %s %s", rep.codeLine(), rep.raw)
			}
			took := time.Since(start)
			proxy.Resume() // the stalled connection was closed by its client: the server rolls back
			t.Logf("answered after %v: %s %s", took.Round(time.Millisecond), rep.codeLine(), rep.raw)
			if rep.status != 503 || rep.code() != "storage_unavailable" || !strings.Contains(rep.raw, "nothing was sold") {
				t.Errorf("the stalled change: %s %s, want 503 storage_unavailable, nothing was sold", rep.codeLine(), rep.raw)
			}
			if bound := lockTimeout + statements; took > bound+slack {
				t.Errorf("the stalled change was answered after %v: want by its deadline, LOCK_TIMEOUT + the transaction budget %v (+ %v slack)", took, bound, slack)
			}
			for _, sku := range c.skus {
				if a := auditOf(t, next, sku); a.Orders != 0 || a.UnitsSold != 0 || a.Stock != 10 || a.LostUpdates != 0 {
					t.Errorf("%s after the stalled change: %+v, want nothing sold", sku, a)
				}
			}
			// Its locks were released: the next buyer, on another replica, gets them at once.
			for _, sku := range c.skus {
				if two := buy(t, next, sku, 1, ""); two.status != 201 || two.body["remaining"] != float64(9) {
					t.Errorf("the next purchase of %s: %s %s, want 201 with 9 left", sku, two.codeLine(), two.raw)
				}
				if a := auditOf(t, next, sku); a.Orders != 1 || a.UnitsSold != 1 || a.Stock != 9 || a.LostUpdates != 0 {
					t.Errorf("%s: %+v, want the next purchase alone", sku, a)
				}
			}
		})
	}
}

// A cart of MaxCartItems on a slow link (every round trip about a second, each well within the
// read timeout) makes some fifty round trips in its transaction: it is given up on at its
// deadline, with nothing sold, not after a minute of round trips, and its locks are free for the
// next buyer.
func TestSlowTransactionEndsAtTheChangeDeadline(t *testing.T) {
	const (
		lockTimeout = 2 * time.Second
		statements  = 5 * time.Second // the transaction budget's part for statements, WORK_DELAY 0
		slack       = 3 * time.Second
	)
	dsn := testenv.MySQLDatabase(t)
	proxy, proxied := tcpproxy.ProxiedDSN(t, dsn, nil)
	slow := ordertest.Start(t, 1, ordertest.Options{Mode: order.ModeZK, DSN: proxied, LockTimeout: lockTimeout})[0]
	next := ordertest.Start(t, 1, ordertest.Options{Mode: order.ModeZK, DSN: dsn, FirstNumber: 2, LockTimeout: lockTimeout})[0]
	var items []any
	var skus []string
	for i := range inventory.MaxCartItems {
		sku := fmt.Sprintf("SLOW-%02d", i)
		resetStock(t, next, sku, 10)
		skus, items = append(skus, sku), append(items, sku, 1)
	}
	waitForFleet(t, next, 2)
	if warm := buyCart(t, slow, "K-WARM", items...); warm.status != 201 { // the SKUs are known to exist now
		t.Fatalf("the first cart: %s %s", warm.codeLine(), warm.raw)
	}

	proxy.SetDelay(500 * time.Millisecond)
	start := time.Now()
	// A key the service makes: a client's key is held before the locks, one more round trip, which
	// on this link runs past the 2 s lock wait and is refused key_unavailable before the
	// transaction this test is about begins.
	rep := buyCart(t, slow, "", items...)
	took := time.Since(start)
	proxy.SetDelay(0)
	t.Logf("answered after %v: %s %s", took.Round(time.Millisecond), rep.codeLine(), rep.raw)
	if rep.status != 503 || rep.code() != "storage_unavailable" || !strings.Contains(rep.raw, "nothing was sold") {
		t.Errorf("the slow cart: %s %s, want 503 storage_unavailable, nothing was sold", rep.codeLine(), rep.raw)
	}
	if bound := lockTimeout + statements; took > bound+slack {
		t.Errorf("the slow cart was answered after %v: want by its deadline, LOCK_TIMEOUT + the transaction budget %v (+ %v slack)", took, bound, slack)
	}
	for _, sku := range skus {
		if a := auditOf(t, next, sku); a.Orders != 1 || a.UnitsSold != 1 || a.Stock != 9 || a.LostUpdates != 0 {
			t.Errorf("%s after the slow cart: %+v, want the first cart's sale alone", sku, a)
		}
	}
	if two := buyCart(t, next, "K-NEXT", items...); two.status != 201 {
		t.Errorf("the next cart, on another replica: %s %s, want 201", two.codeLine(), two.raw)
	}
}
