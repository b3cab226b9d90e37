package order_test

import (
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// A purchase's lock waits share one LOCK_TIMEOUT. This one first waits for the fleet to admit it
// (a switch under way, held up by a purchase in its work) and then for a lock nobody releases
// (a row of db-locktable that the test holds): it is answered lock_unavailable once one
// LOCK_TIMEOUT has passed since it arrived, not one LOCK_TIMEOUT after the switch let it in.
func TestPurchaseWaitsOneLockTimeoutInAll(t *testing.T) {
	const (
		lockTimeout = 6 * time.Second
		work        = 5 * time.Second // the purchase in flight holds the switch up this long
		slack       = 2500 * time.Millisecond
	)
	r := newCluster(t, 1, clusterOpts{Mode: order.ModeZK, WorkDelay: work, LockTimeout: lockTimeout})[0]
	const sku = "ONE-LOCK-TIMEOUT"
	resetStock(t, r, sku, 10)
	// The lock the purchase will wait for in db-locktable, held past the test.
	testenv.Exec(t, r.DSN, "INSERT INTO table_locks (name, owner, expires_at) VALUES ('sku:"+sku+"', 'the test', UTC_TIMESTAMP() + INTERVAL 1 HOUR)")

	inFlight := make(chan reply, 1)
	go func() { inFlight <- buy(t, r, sku, 1, "in-flight") }()
	time.Sleep(500 * time.Millisecond) // in its work now, holding its pass
	switched := make(chan reply, 1)
	go func() { switched <- admin(t, r, "PUT", "/admin/lock-mode", `{"mode":"db-locktable"}`) }()
	time.Sleep(500 * time.Millisecond) // the switch waits for the pass; admissions wait for the switch

	start := time.Now()
	rep := buy(t, r, sku, 1, "waits-twice")
	took := time.Since(start)

	if in := <-inFlight; in.status != 201 {
		t.Fatalf("the purchase in flight: %s %s", in.codeLine(), in.raw)
	}
	if sw := <-switched; sw.status != 200 {
		t.Fatalf("the switch: %s %s", sw.codeLine(), sw.raw)
	}
	// Admitted before the switch, it would have sold in zk after the purchase in flight.
	if rep.status != 503 || rep.code() != "lock_unavailable" {
		t.Fatalf("the purchase that waited for the switch, then for a held lock: %s %s, want 503 lock_unavailable", rep.codeLine(), rep.raw)
	}
	if took > lockTimeout+slack {
		t.Errorf("the purchase waited %v for the fleet and the lock in all: want at most LOCK_TIMEOUT %v (+ %v slack)", took, lockTimeout, slack)
	}
}
