package order_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// The first reproduction, on three replicas (WORK_DELAY 1 s, zk-unfenced): a switch to
// redis through replica 1 alone, then a purchase on replica 1 and one on replica 2 at the same
// moment. Before the fleet's mode lived in ZooKeeper, replica 2 still ran zk-unfenced, both said
// "remaining": 9, and the audit said lost_updates 1. Now the switch is the fleet's: both run
// redis, one waits for the other.
func TestSwitchThroughOneReplicaSwitchesTheFleet(t *testing.T) {
	rs := newCluster(t, 3, clusterOpts{Mode: order.ModeZKUnfenced, WorkDelay: time.Second})
	const sku = "FLEET-ONE"
	resetStock(t, rs[0], sku, 10)
	if rep := admin(t, rs[0], "PUT", "/admin/lock-mode", `{"mode":"redis"}`); rep.status != 200 || rep.body["mode"] != "redis" {
		t.Fatalf("switch: %d %s", rep.status, rep.raw)
	}
	for _, r := range rs {
		if rep := admin(t, r, "GET", "/admin/lock-mode", ""); rep.body["mode"] != "redis" || rep.body["version"] != float64(1) {
			t.Fatalf("%s answers the fleet's mode %s, want redis at version 1", r.Name, rep.raw)
		}
	}
	replies := buyAtOnce(t, sku, rs[0], rs[1])
	for _, rep := range replies {
		if rep.status != 201 || rep.body["mode"] != "redis" {
			t.Fatalf("purchase: %d %s, want 201 in mode redis", rep.status, rep.raw)
		}
	}
	if replies[0].body["remaining"] == replies[1].body["remaining"] {
		t.Errorf("both purchases say remaining %v: they read the same stock", replies[0].body["remaining"])
	}
	if a := auditOf(t, rs[0], sku); a.LostUpdates != 0 || a.UnitsSold != 2 || a.Stock != 8 {
		t.Fatalf("audit %+v", a)
	}

	// The second: a replica (re)started with LOCK_MODE=zk-unfenced, as compose's restart policy
	// starts one, joins the fleet in redis and sells beside replica 1 without losing an update.
	late := ordertest.Start(t, 1, ordertest.Options{Mode: order.ModeZKUnfenced, WorkDelay: time.Second, DSN: rs[0].DSN, FirstNumber: 4})[0]
	if rep := admin(t, late, "GET", "/admin/lock-mode", ""); rep.body["mode"] != "redis" {
		t.Fatalf("a replica started with LOCK_MODE=zk-unfenced answers %s, want the fleet's redis", rep.raw)
	}
	for _, rep := range buyAtOnce(t, sku, rs[0], late) {
		if rep.status != 201 || rep.body["mode"] != "redis" {
			t.Fatalf("purchase: %d %s, want 201 in mode redis", rep.status, rep.raw)
		}
	}
	if a := auditOf(t, rs[0], sku); a.LostUpdates != 0 || a.UnitsSold != 4 || a.Stock != 6 {
		t.Fatalf("audit %+v", a)
	}
}

// buyAtOnce buys one unit of sku on each replica at the same moment.
func buyAtOnce(t *testing.T, sku string, rs ...*replica) []reply {
	out := make([]reply, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() { out[i] = buy(t, r, sku, 1, "") })
	}
	wg.Wait()
	return out
}

// A mode that a member of the fleet cannot run (redis, on a replica without REDIS_ADDR) is refused
// at the switch, whichever replica is asked, and nothing changes; a replica without Redis that
// joins a fleet running redis is not ready, says why, and sells nothing.
func TestModeAReplicaCannotRunIsRefused(t *testing.T) {
	rs := newCluster(t, 1, clusterOpts{})
	noRedis := ordertest.Start(t, 1, ordertest.Options{DSN: rs[0].DSN, FirstNumber: 2, NoRedis: true})[0]
	const sku = "FLEET-CANNOT"
	resetStock(t, rs[0], sku, 10)
	rep := admin(t, rs[0], "PUT", "/admin/lock-mode", `{"mode":"redis-fenced"}`)
	if rep.status != 409 || rep.code() != "mode_unavailable" || !strings.Contains(rep.raw, "order2") {
		t.Fatalf("switch to a mode order2 cannot run: %d %s, want 409 mode_unavailable naming order2", rep.status, rep.raw)
	}
	if rep := admin(t, noRedis, "GET", "/admin/lock-mode", ""); rep.body["mode"] != "zk" || rep.body["version"] != float64(0) {
		t.Fatalf("after a refused switch: %s, want zk at version 0", rep.raw)
	}
	// In a fleet of replicas that can, the switch goes through; a replica without Redis then joins.
	rs2 := newCluster(t, 1, clusterOpts{DSN: rs[0].DSN, Fleet: "other-" + testenv.UniqueName(t)})
	if rep := admin(t, rs2[0], "PUT", "/admin/lock-mode", `{"mode":"redis"}`); rep.status != 200 {
		t.Fatalf("switch: %d %s", rep.status, rep.raw)
	}
	late := ordertest.Start(t, 1, ordertest.Options{DSN: rs[0].DSN, Fleet: rs2[0].Fleet, FirstNumber: 9, NoRedis: true})[0]
	ready := call(t, "GET", late.URL+"/readyz", "")
	if ready.status != 503 || !strings.Contains(ready.raw, "redis") {
		t.Fatalf("readyz of a replica that cannot run the fleet's mode: %d %s, want 503 saying why", ready.status, ready.raw)
	}
	if rep := buy(t, late, sku, 1, ""); rep.status != 503 || rep.code() != "mode_unavailable" {
		t.Fatalf("purchase on it: %d %s, want 503 mode_unavailable", rep.status, rep.raw)
	}
	if a := auditOf(t, rs[0], sku); a.UnitsSold != 0 {
		t.Fatalf("audit %+v: a refused purchase sold", a)
	}
}

// Two switches at once through two replicas: both are applied one after the other (versions 1
// and 2), neither lost; a switch with a stale version is refused with 409.
func TestConcurrentSwitchesThroughTwoReplicas(t *testing.T) {
	rs := newCluster(t, 2, clusterOpts{})
	var wg sync.WaitGroup
	replies := make([]reply, 2)
	for i, mode := range []string{"db-cas", "zk-batch"} {
		wg.Go(func() { replies[i] = admin(t, rs[i], "PUT", "/admin/lock-mode", fmt.Sprintf(`{"mode":%q}`, mode)) })
	}
	wg.Wait()
	versions := map[float64]bool{}
	for _, rep := range replies {
		if rep.status != 200 {
			t.Fatalf("switch: %d %s", rep.status, rep.raw)
		}
		versions[rep.body["version"].(float64)] = true
	}
	if !versions[1] || !versions[2] {
		t.Fatalf("versions %v, want 1 and 2: each switch written once, in turn", versions)
	}
	rep := admin(t, rs[0], "PUT", "/admin/lock-mode", `{"mode":"zk","version":1}`)
	if rep.status != 409 || rep.code() != "version_conflict" {
		t.Fatalf("switch from a stale version: %d %s, want 409 version_conflict", rep.status, rep.raw)
	}
}

// A replica cut off from ZooKeeper (a black hole) loses its place in the fleet within dlock's
// bound: it answers 503 not_a_member, sells nothing, and is not ready; healed, it rejoins and
// sells in the fleet's mode, which was switched meanwhile through another replica.
func TestReplicaCutOffFromZooKeeperStartsNoChange(t *testing.T) {
	servers := testenv.ZKServers(t)
	proxy := tcpproxy.New(t, servers[0])
	rs := newCluster(t, 1, clusterOpts{LockTimeout: 2 * time.Second})
	cut := ordertest.Start(t, 1, ordertest.Options{DSN: rs[0].DSN, FirstNumber: 2, ZKServers: []string{proxy.Addr()}, LockTimeout: 2 * time.Second})[0]
	const sku = "FLEET-CUT"
	resetStock(t, rs[0], sku, 10)
	proxy.Stall()
	deadline := time.Now().Add(15 * time.Second)
	for {
		rep := buy(t, cut, sku, 1, "")
		if rep.code() == "not_a_member" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a replica cut off from ZooKeeper still answers %d %s after 15 s", rep.status, rep.raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if rep := call(t, "GET", cut.URL+"/readyz", ""); rep.status != 503 {
		t.Fatalf("readyz while cut off: %d %s", rep.status, rep.raw)
	} else {
		msg, _ := rep.body["error"].(string)
		checkNoInternals(t, "readyz while cut off", msg) // issue 50, finding 6: it showed the fleet's and ZooKeeper's errors
	}
	if rep := admin(t, rs[0], "PUT", "/admin/lock-mode", `{"mode":"db-cas"}`); rep.status != 200 {
		t.Fatalf("switch beside a cut-off replica: %d %s", rep.status, rep.raw)
	}
	sold := auditOf(t, rs[0], sku).UnitsSold
	proxy.Resume()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		rep := buy(t, cut, sku, 1, "")
		if rep.status == 201 {
			if rep.body["mode"] != "db-cas" {
				t.Fatalf("rejoined in %v, want the fleet's db-cas", rep.body["mode"])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not rejoined 30 s after the cut healed: %d %s", rep.status, rep.raw)
		}
	}
	if a := auditOf(t, rs[0], sku); a.UnitsSold != sold+1 || a.LostUpdates != 0 {
		t.Fatalf("audit %+v, want %d sold", a, sold+1)
	}
}

// Close drains: a purchase in its work when the replica closes still answers, and is sold, before
// Close returns (before, Close returned at once, and Run's 30 s grace then closed the lock client
// and the pool under a running change); a purchase after it is refused as shutting_down.
func TestCloseWaitsForTheChangesInFlight(t *testing.T) {
	r := newCluster(t, 1, clusterOpts{WorkDelay: 1500 * time.Millisecond})[0]
	const sku = "FLEET-DRAIN"
	resetStock(t, r, sku, 10)
	answered := make(chan time.Time, 1)
	go func() {
		rep := buy(t, r, sku, 1, "")
		if rep.status != 201 {
			t.Errorf("purchase in flight at Close: %d %s", rep.status, rep.raw)
		}
		answered <- time.Now()
	}()
	time.Sleep(300 * time.Millisecond) // in its work now
	r.Srv.Close()
	closed := time.Now()
	select {
	case at := <-answered:
		if at.After(closed) {
			t.Fatalf("Close returned %v before the purchase in flight answered", at.Sub(closed))
		}
	default:
		t.Fatal("Close returned while a purchase was still in flight")
	}
	if rep := buy(t, r, sku, 1, ""); rep.status != 503 || rep.code() != "shutting_down" {
		t.Fatalf("purchase after Close: %d %s, want 503 shutting_down", rep.status, rep.raw)
	}
	if a := auditOf(t, r, sku); a.UnitsSold != 1 {
		t.Fatalf("audit %+v", a)
	}
}
