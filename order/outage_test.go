package order_test

import (
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

func TestZooKeeperUnreachable(t *testing.T) {
	for _, mode := range []order.LockMode{order.ModeZK, order.ModeZKBatch} {
		t.Run(string(mode), func(t *testing.T) { testZooKeeperUnreachable(t, mode) })
	}
}

func testZooKeeperUnreachable(t *testing.T, mode order.LockMode) {
	proxy := tcpproxy.New(t, testenv.ZKServers(t)[0])
	const lockTimeout = time.Second
	rs := newCluster(t, 1, clusterOpts{Mode: mode, ZKServers: []string{proxy.Addr()}, LockTimeout: lockTimeout})
	r := rs[0]
	sku := "SKU-outage"
	resetStock(t, r, sku, 10)
	if rep := buy(t, r, sku, 1, ""); rep.status != 201 {
		t.Fatalf("before the outage: %d %s", rep.status, rep.raw)
	}

	proxy.Cut()
	for i := 0; i < 3; i++ {
		start := time.Now()
		rep := buy(t, r, sku, 1, "")
		took := time.Since(start)
		if rep.status != 503 || rep.code() != "lock_unavailable" {
			t.Fatalf("during the outage: %d %s, want 503 lock_unavailable", rep.status, rep.raw)
		}
		// LOCK_TIMEOUT plus a little: the answer must not hang on ZooKeeper.
		if took > lockTimeout+2*time.Second {
			t.Fatalf("503 took %v with LOCK_TIMEOUT %v", took, lockTimeout)
		}
	}
	if rep := call(t, "GET", r.URL+"/readyz", ""); rep.status != 503 || rep.code() != "not_ready" {
		t.Fatalf("readyz during the outage: %d %s", rep.status, rep.raw)
	}
	if rep := call(t, "GET", r.URL+"/healthz", ""); rep.status != 200 {
		t.Fatalf("healthz during the outage: %d (liveness must not depend on ZooKeeper)", rep.status)
	}
	if a := auditOf(t, r, sku); a.Orders != 1 || a.Stock != 9 {
		t.Fatalf("purchases during the outage changed stock: %+v", a)
	}

	proxy.Restore()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rep := buy(t, r, sku, 1, "")
		if rep.status == 201 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no purchase succeeded after ZooKeeper came back: %d %s", rep.status, rep.raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if rep := call(t, "GET", r.URL+"/readyz", ""); rep.status != 200 {
		t.Fatalf("readyz after the outage: %d %s", rep.status, rep.raw)
	}
	if a := auditOf(t, r, sku); a.Oversold != 0 || a.LostUpdates != 0 || a.Stock != 10-a.UnitsSold {
		t.Fatalf("audit after the outage: %+v", a)
	}
}
