package order_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// A purchase's COMMIT goes unanswered on the writer's node, which then dies. When the COMMIT had
// applied, its writeset reached every node before the node committed it, and the service finds
// the order through its new writer (another node, causal reads): 201, with no wait for the commit
// bound. When it never reached the node, no other node can say so (a COMMIT may
// still be on its way to a node out of reach, and apply when it rejoins): the answer stays
// outcome_unknown with its key, after the commit bound, and nothing was sold.
func TestGaleraUnansweredCommitOnAKilledNodeIsFoundByTheWriter(t *testing.T) {
	for _, c := range []struct {
		name        string
		applied     bool
		fault, heal string
		arm         func(*tcpproxy.Proxy)
	}{
		// applied, and the node unreachable from then on
		{"applied", true, "kill", "restart", func(p *tcpproxy.Proxy) { p.CutAfterQuery(isCommit, true) }},
		// never applied: the node saw its client go before the COMMIT
		{"not-applied", false, "kill", "restart", func(p *tcpproxy.Proxy) { p.DropQueryAndHold(isCommit) }},
	} {
		applied := c.applied
		t.Run(c.name, func(t *testing.T) {
			nodes := testenv.GaleraDatabase(t)
			proxies := make([]*tcpproxy.Proxy, len(nodes))
			proxied := make([]string, len(nodes))
			for i, n := range nodes {
				proxies[i], proxied[i] = tcpproxy.ProxiedDSN(t, n, nil)
			}
			r := newCluster(t, 1, clusterOpts{Nodes: proxied, Mode: order.ModeZK})[0]
			writer := r.Cluster.Writer()
			victim := strconv.Itoa(writer + 1)
			const sku = "gs-a"
			resetStock(t, r, sku, 10)
			key := "gs-" + c.name
			c.arm(proxies[writer])
			answered := make(chan reply, 1)
			start := time.Now()
			go func() { answered <- buy(t, r, sku, 1, key) }()
			time.Sleep(500 * time.Millisecond) // the purchase's COMMIT is sent within it
			testenv.GaleraControl(t, c.fault, victim)
			t.Cleanup(func() {
				t.Logf("node %s: %s %s", victim, c.heal, testenv.GaleraControl(t, c.heal, victim))
				t.Logf("node %s: %s", victim, testenv.GaleraControl(t, "wait-synced"))
			})
			rep := <-answered
			took := time.Since(start)

			survivor := verifyStore(t, nodes[(writer+1)%len(nodes)])
			orders := orderCount(t, survivor, key)
			t.Logf("the writer's node %s (%s) after its COMMIT went unanswered: %s after %v; %d order under the key on the survivors",
				victim, c.fault, rep.codeLine(), took.Round(time.Millisecond), orders)
			switch {
			case applied && (rep.status != 201 || orders != 1):
				t.Fatalf("a COMMIT applied before its node died: %d %s, %d orders; want 201 and its order", rep.status, rep.raw, orders)
			case !applied && (rep.status != 503 || rep.code() != "outcome_unknown" || rep.body["request_id"] != key || orders != 0):
				t.Fatalf("a COMMIT that never reached its node, which died: %d %s, %d orders; want 503 outcome_unknown with its key, and no order", rep.status, rep.raw, orders)
			}
			if a := directAudit(t, survivor, sku); a.Stock != 10-int64(orders) || a.Oversold != 0 || a.LostUpdates != 0 {
				t.Fatalf("audit on the survivors: %+v", a)
			}
		})
	}
}
