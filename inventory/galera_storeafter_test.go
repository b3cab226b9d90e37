package inventory_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// StoreAfter hands out another node's Store, for a COMMIT unanswered at a node, only once the
// cluster no longer lists that node: not for the writer itself, not for a member, and not while a
// member is merely out of this client's reach (its link cut: it may still commit); once the node
// is cut off from its peers (gmcast.isolate) and they have gone on without it, the writer's.
func TestGaleraStoreAfterOnlyOnceTheNodeHasLeft(t *testing.T) {
	nodes := testenv.GaleraDatabase(t)
	openStoreAt(t, nodes[0]) // migrates
	proxies := make([]*tcpproxy.Proxy, len(nodes))
	proxied := make([]string, len(nodes))
	for i, n := range nodes {
		proxies[i], proxied[i] = tcpproxy.ProxiedDSN(t, n, nil)
	}
	ctx := context.Background()
	c, err := inventory.OpenCluster(ctx, proxied, inventory.PoolOptions{MaxOpen: 2}, inventory.ClusterOptions{
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: time.Second, ReturnAfter: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	writer := c.Writer()
	other := (writer + 1) % len(nodes)
	if _, ok := c.StoreAfter(ctx, proxies[writer].Addr()); ok {
		t.Fatal("StoreAfter answered for the writer's own node")
	}
	if _, ok := c.StoreAfter(ctx, proxies[other].Addr()); ok {
		t.Fatalf("StoreAfter answered for node %d, a member", other+1)
	}
	if _, ok := c.StoreAfter(ctx, "127.0.0.1:1"); ok {
		t.Fatal("StoreAfter answered for an address that is no node's")
	}
	proxies[other].Cut()
	if _, ok := c.StoreAfter(ctx, proxies[other].Addr()); ok {
		t.Fatalf("StoreAfter answered for node %d, a member out of this client's reach", other+1)
	}
	proxies[other].Restore()

	n := strconv.Itoa(other + 1)
	testenv.GaleraControl(t, "isolate", n)
	isolated := time.Now()
	defer func() { t.Logf("node %s: %s", n, testenv.GaleraControl(t, "rejoin", n)) }()
	for {
		s, ok := c.StoreAfter(ctx, proxies[other].Addr())
		if ok {
			if s != c.Store() {
				t.Fatal("StoreAfter answered a Store other than the writer's")
			}
			t.Logf("node %s isolated: StoreAfter answered the writer's Store %v after", n, time.Since(isolated).Round(time.Millisecond))
			return
		}
		if time.Since(isolated) > 30*time.Second {
			t.Fatalf("node %s isolated 30 s ago, and StoreAfter still does not answer", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
