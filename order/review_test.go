package order_test

import (
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// The findings of issue 29's review, item 3. Each test here failed on the code before its fix.

// zk-herd's session is opened on first use. With ZooKeeper unreachable, purchases that arrive
// together must each give up at their own LOCK_TIMEOUT: waiting in turn for the one opening the
// session, the last of N answered after about N seconds.
func TestHerdSessionWaitersLeaveAtTheirTimeout(t *testing.T) {
	proxy := tcpproxy.New(t, testenv.ZKServers(t)[0])
	const lockTimeout = time.Second
	r := newCluster(t, 1, clusterOpts{Mode: order.ModeZKHerd, ZKServers: []string{proxy.Addr()}, LockTimeout: lockTimeout})[0]
	const sku = "REVIEW-HERD"
	resetStock(t, r, sku, 10)
	proxy.Cut() // before the herd session was ever opened
	const n = 6
	var wg sync.WaitGroup
	took := make([]time.Duration, n)
	replies := make([]reply, n)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			replies[i] = buy(t, r, sku, 1, "")
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, rep := range replies {
		if rep.status != 503 || rep.code() != "lock_unavailable" {
			t.Errorf("purchase %d: %d %s, want 503 lock_unavailable", i, rep.status, rep.raw)
		}
		// One LOCK_TIMEOUT, and the second go-zookeeper spends closing a session that never
		// connected, with room for a loaded machine: not one turn per waiter.
		if took[i] > 2*lockTimeout+1500*time.Millisecond {
			t.Errorf("purchase %d answered after %v with LOCK_TIMEOUT %v (all %v)", i, took[i].Round(time.Millisecond), lockTimeout, took)
		}
	}
	if a := auditOf(t, r, sku); a.Orders != 0 || a.Stock != 10 {
		t.Fatalf("purchases without a lock changed stock: %+v", a)
	}
}
