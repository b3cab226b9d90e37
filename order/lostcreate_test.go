package order_test

import (
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

const opCreate = 1 // ZooKeeper's create request (a container's create is another opcode)

// Issue 46: a zk-herd purchase whose lock node's create ZooKeeper applied but whose reply was
// lost left the node in the replica's herd session. Once it was the lowest it held the SKU's lock
// for nobody: every later purchase of the SKU waited and was refused (503) until the process
// ended. The purchase must find its node by its protected name and sell, and so must the next.
func TestHerdLostCreateReplyDoesNotBlockTheSKU(t *testing.T) {
	proxy := tcpproxy.New(t, testenv.ZKServers(t)[0])
	r := newCluster(t, 1, clusterOpts{Mode: order.ModeZKHerd, ZKServers: []string{proxy.Addr()}, LockTimeout: 3 * time.Second})[0]
	const sku = "HERD-LOST-CREATE"
	resetStock(t, r, sku, 10)
	if rep := buy(t, r, sku, 1, ""); rep.status != 201 { // opens the herd session
		t.Fatalf("before the lost reply: %s", rep.raw)
	}
	// Only the herd session's connection carries a create now (the fleet's nodes are made).
	proxy.CutAfterRequest(func(op int32) bool { return op == opCreate })
	if rep := buy(t, r, sku, 1, ""); rep.status != 201 {
		t.Errorf("the purchase whose create reply was lost: %d %s, want 201", rep.status, rep.raw)
	}
	for i := range 3 {
		if rep := buy(t, r, sku, 1, ""); rep.status != 201 {
			t.Fatalf("purchase %d after the lost reply: %d %s, want 201", i, rep.status, rep.raw)
		}
	}
	if a := auditOf(t, r, sku); a.Orders != 5 || a.Stock != 5 || a.Oversold != 0 || a.LostUpdates != 0 {
		t.Fatalf("audit: %+v, want 5 orders and 5 left", a)
	}
}
