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
	sku := fmt.Sprintf("SQ-%d", time.Now().UnixNano())
	owner, stranger := squatLockPath(t, sku)
	path := order.LockRoot + "/" + sku
	open := zk.WorldACL(zk.PermAll)

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
	squatterLeaves(t, owner, stranger, path)
	if rep := buy(t, r, sku, 1, "sq-2"); rep.status != 201 {
		t.Fatalf("a purchase once the squatter left: %d %s", rep.status, rep.raw)
	}
	if acl, _, err := owner.GetACL(path); err == nil && len(acl) == 1 && acl[0] == open[0] {
		t.Errorf("the lock path is still open to all after zkstock made it anew: %v", acl)
	}
}

// squatLockPath plays finding 1's setup: on an ensemble where zkstock has not run yet (the lock
// root open to all, as on a fresh one: the replicas' start closes it again), a client without
// zkstock's credentials makes sku's lock path and queues in it. It returns zkstock's own
// connection (owner) and the squatter's, which holds its node until closed.
func squatLockPath(t *testing.T, sku string) (owner, stranger *zk.Conn) {
	t.Helper()
	servers := testenv.ZKServers(t)
	owner = testenv.ZKConn(t, servers) // zkstock's identity
	path := order.LockRoot + "/" + sku
	testenv.DeleteZKTreeAtCleanup(t, servers, path)
	open := zk.WorldACL(zk.PermAll)
	stranger, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stranger.Close)
	// The lock root may be an empty container another test's replicas left: ZooKeeper reaps it at
	// any moment, between this setup's steps too (zk: node does not exist); then it starts over.
	squat := func() error {
		for _, p := range []string{"/zkstock", "/zkstock/locks", order.LockRoot} {
			if _, err := owner.Create(p, nil, 0, open); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return err
			}
		}
		if _, err := owner.SetACL(order.LockRoot, open, -1); err != nil {
			return err
		}
		if _, err := stranger.Create(path, nil, 0, open); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
		_, err := stranger.Create(path+"/_c_00000000-0000-0000-0000-000000000000-lock-", nil, zk.FlagEphemeralSequential, open)
		return err
	}
	for try := 1; ; try++ {
		err := squat()
		if err == nil {
			break
		}
		if !errors.Is(err, zk.ErrNoNode) || try == 5 {
			t.Fatal(err)
		}
	}
	return owner, stranger
}

// squatterLeaves closes the squatter's session and waits until its node under path is gone.
func squatterLeaves(t *testing.T, owner, stranger *zk.Conn, path string) {
	t.Helper()
	stranger.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		kids, _, err := owner.Children(path)
		if err == nil && len(kids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the squatter's node outlived its session: %v %v", kids, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Finding 1, for cancellations: a cancellation takes its order's SKU's lock as a purchase does, so
// a squatted lock path must refuse it the same way, at once, 503 lock_path_foreign, whoever asks
// (the key's holder, the admin), and change nothing; a caller with a wrong key is told wrong_key,
// not what lock the order's SKU has. The order is bought in a mode whose lock is not a ZooKeeper
// path (db-forupdate), then the fleet switched back to zk. On the code before, the cancellation
// queued behind the squatter's node and answered 503 lock_unavailable after LOCK_TIMEOUT (3 s).
func TestCancelOnASquattedLockPathIsRefused(t *testing.T) {
	sku := fmt.Sprintf("SQC-%d", time.Now().UnixNano())
	owner, stranger := squatLockPath(t, sku)

	r := newCluster(t, 1, clusterOpts{LockTimeout: 3 * time.Second})[0]
	resetStock(t, r, sku, 5)
	switchTo := func(mode string) {
		t.Helper()
		if rep := admin(t, r, "PUT", "/admin/lock-mode", fmt.Sprintf(`{"mode":%q}`, mode)); rep.status != 200 {
			t.Fatalf("switch to %s: %d %s", mode, rep.status, rep.raw)
		}
	}
	switchTo("db-forupdate")
	const key = "sqc-bought-0d9f1c7e-5b0a-4c1e-9a63-2f7d8e4b6a10"
	bought := buy(t, r, sku, 2, key)
	if bought.status != 201 {
		t.Fatalf("a purchase in db-forupdate: %d %s", bought.status, bought.raw)
	}
	id := bought.orderID()
	switchTo("zk")

	cancelURL := fmt.Sprintf("%s/v1/orders/%d/cancel", r.URL, id)
	start := time.Now()
	rep := call(t, "POST", cancelURL, fmt.Sprintf(`{"request_id":%q}`, key))
	took := time.Since(start)
	if rep.status != 503 || rep.code() != "lock_path_foreign" { // the code before: 503 lock_unavailable, after 3 s
		t.Fatalf("a cancellation on a squatted lock path: %d %s after %v, want 503 lock_path_foreign", rep.status, rep.raw, took)
	}
	if took > time.Second {
		t.Errorf("a cancellation on a squatted lock path was answered after %v: it waited", took)
	}
	if rep := call(t, "POST", cancelURL, "", "Authorization", "Bearer "+adminToken, "Content-Type", "application/json"); rep.status != 503 || rep.code() != "lock_path_foreign" {
		t.Errorf("the admin's cancellation on a squatted lock path: %d %s, want 503 lock_path_foreign", rep.status, rep.raw)
	}
	if rep := call(t, "POST", cancelURL, `{"request_id":"not-the-key"}`); rep.status != 403 || rep.code() != "wrong_key" {
		t.Errorf("a cancellation with a wrong key: %d %s, want 403 wrong_key (the lock path is none of its business)", rep.status, rep.raw)
	}
	if a := auditOf(t, r, sku); a.Orders != 1 || a.Stock != 3 || a.Cancelled != 0 {
		t.Fatalf("refused cancellations changed the stock or the order: %+v", a)
	}

	squatterLeaves(t, owner, stranger, order.LockRoot+"/"+sku)
	if rep := call(t, "POST", cancelURL, fmt.Sprintf(`{"request_id":%q}`, key)); rep.status != 200 {
		t.Fatalf("a cancellation once the squatter left: %d %s", rep.status, rep.raw)
	}
	if a := auditOf(t, r, sku); a.Stock != 5 || a.Cancelled != 1 {
		t.Fatalf("after the cancellation: %+v, want the stock back at 5 and one order cancelled", a)
	}
}
