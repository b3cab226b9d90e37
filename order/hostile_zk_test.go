package order_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// Issue 50, finding 1: on an ensemble where zkstock had not yet run, a client without its
// credentials made a SKU's lock path (ensure_path: persistent, open to all) and queued in it; from
// then on every purchase of the SKU waited for its lock and answered 503 lock_unavailable, and the
// lock view showed the squatter as the holder. Now the replica refuses that SKU's changes at
// once, 503 lock_path_foreign, and its lock view too; once nothing is under the path, zkstock
// deletes it and makes it anew, its own. On the code before, the purchase waited LOCK_TIMEOUT
// (3 s here) and answered 503 lock_unavailable.
func TestSquattedLockPathIsRefused(t *testing.T) {
	servers := testenv.ZKServers(t)
	owner := testenv.ZKConn(t, servers) // zkstock's identity
	sku := fmt.Sprintf("SQ-%d", time.Now().UnixNano())
	path := order.LockRoot + "/" + sku
	testenv.DeleteZKTreeAtCleanup(t, servers, path)
	// Before the first start the lock root is open to all, as on a fresh ensemble (the replicas'
	// start closes it again, as it does a fresh ensemble's).
	open := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/zkstock", "/zkstock/locks", order.LockRoot} {
		if _, err := owner.Create(p, nil, 0, open); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if _, err := owner.SetACL(order.LockRoot, open, -1); err != nil {
		t.Fatal(err)
	}
	stranger, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.Create(path, nil, 0, open); err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.Create(path+"/_c_00000000-0000-0000-0000-000000000000-lock-", nil, zk.FlagEphemeralSequential, open); err != nil {
		t.Fatal(err)
	}

	r := newCluster(t, 1, clusterOpts{LockTimeout: 3 * time.Second})[0]
	resetStock(t, r, sku, 5)
	start := time.Now()
	rep := buy(t, r, sku, 1, "sq-1")
	took := time.Since(start)
	if rep.status != 503 || rep.code() != "lock_path_foreign" { // the code before: 503 lock_unavailable, after 3 s
		t.Fatalf("a purchase on a squatted lock path: %d %s after %v, want 503 lock_path_foreign", rep.status, rep.raw, took)
	}
	if took > time.Second {
		t.Errorf("a purchase on a squatted lock path was answered after %v: it waited", took)
	}
	cart := call(t, "POST", r.URL+"/v1/orders", fmt.Sprintf(`{"items":[{"sku":%q,"qty":1}]}`, sku))
	if cart.status != 503 || cart.code() != "lock_path_foreign" {
		t.Errorf("a cart on a squatted lock path: %d %s, want 503 lock_path_foreign", cart.status, cart.raw)
	}
	if view := call(t, "GET", r.URL+"/v1/products/"+sku+"/lock", ""); view.status != 503 || view.code() != "lock_path_foreign" {
		t.Errorf("the lock view of a squatted lock path: %d %s, want 503 lock_path_foreign, not the squatter as the holder", view.status, view.raw)
	}
	if a := auditOf(t, r, sku); a.Orders != 0 || a.Stock != 5 {
		t.Fatalf("refused purchases changed the stock: %+v", a)
	}

	// The squatter leaves: the path, empty, is deleted and made anew with zkstock's ACL.
	stranger.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		kids, _, err := owner.Children(path)
		if err == nil && len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the squatter's node outlived its session: %v %v", kids, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rep := buy(t, r, sku, 1, "sq-2"); rep.status != 201 {
		t.Fatalf("a purchase once the squatter left: %d %s", rep.status, rep.raw)
	}
	if acl, _, err := owner.GetACL(path); err == nil && len(acl) == 1 && acl[0] == open[0] {
		t.Errorf("the lock path is still open to all after zkstock made it anew: %v", acl)
	}
}
