package order_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// A client of the ensemble without zkstock's credentials can look at the fleet's nodes and the
// locks, but can neither change the fleet's mode, nor queue for or break a SKU's lock, nor remove a
// member, and a sale under way while it tries stays exact.
func TestZKNodesRefuseClientsWithoutCredentials(t *testing.T) {
	rs := newCluster(t, 2, clusterOpts{WorkDelay: time.Second})
	sku := "SKU-acl"
	resetStock(t, rs[0], sku, 1)
	stranger, _, err := zk.Connect(testenv.ZKServers(t), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	before := admin(t, rs[0], "GET", "/admin/lock-mode", "")
	if before.status != 200 {
		t.Fatalf("lock mode: %d %s", before.status, before.raw)
	}

	got := make(chan reply, 2)
	go func() { got <- buy(t, rs[0], sku, 1, "") }()
	lockPath := order.LockRoot + "/" + sku
	var kids []string
	for deadline := time.Now().Add(10 * time.Second); len(kids) == 0 && time.Now().Before(deadline); {
		kids, _, _ = stranger.Children(lockPath) // reading is open to all
		time.Sleep(10 * time.Millisecond)
	}
	if len(kids) != 1 {
		t.Fatalf("lock nodes %v: want the first buyer's", kids)
	}
	go func() { got <- buy(t, rs[1], sku, 1, "") }()
	fleetRoot := order.FleetRoot + "/" + rs[0].Fleet
	if _, _, err := stranger.Get(fleetRoot + "/mode"); err != nil {
		t.Fatalf("a client without credentials cannot read the mode: %v", err)
	}

	seq := int32(zk.FlagEphemeralSequential)
	open := zk.WorldACL(zk.PermAll)
	for _, try := range []struct {
		what string
		err  error
	}{
		{"set the fleet's mode", func() error { _, err := stranger.Set(fleetRoot+"/mode", []byte("none"), -1); return err }()},
		{"delete the holder's lock node", stranger.Delete(lockPath+"/"+kids[0], -1)},
		{"queue for the SKU's lock", func() error { _, err := stranger.Create(lockPath+"/_c_x-lock-", nil, seq, open); return err }()},
		{"create a lock path", func() error { _, err := stranger.Create(order.LockRoot+"/SKU-acl-other", nil, 0, open); return err }()},
		{"remove a member", stranger.Delete(fleetRoot+"/members/"+rs[1].Name, -1)},
		{"add a member", func() error { _, err := stranger.Create(fleetRoot+"/members/intruder", nil, 0, open); return err }()},
		{"change the ACL of the mode", func() error { _, err := stranger.SetACL(fleetRoot+"/mode", open, -1); return err }()},
	} {
		if !errors.Is(try.err, zk.ErrNoAuth) {
			t.Errorf("a client without credentials could %s: %v (want %v)", try.what, try.err, zk.ErrNoAuth)
		}
	}

	answers := map[string]int{}
	for range 2 {
		answers[(<-got).codeLine()]++
	}
	if answers["201 "] != 1 || answers["409 out_of_stock"] != 1 {
		t.Errorf("answers %v: want one 201 and one 409 out_of_stock", answers)
	}
	if a := auditOf(t, rs[0], sku); a.Orders != 1 || a.Stock != 0 || a.Oversold != 0 || a.LostUpdates != 0 {
		t.Errorf("audit %+v: want one order, no stock left, nothing oversold", a)
	}
	after := admin(t, rs[1], "GET", "/admin/lock-mode", "")
	if after.status != 200 || after.body["mode"] != before.body["mode"] || after.body["version"] != before.body["version"] {
		t.Errorf("the fleet's mode was %s, is now %d %s", before.raw, after.status, after.raw)
	}
	if members, _ := after.body["members"].([]any); len(members) != 2 {
		t.Errorf("members %v: want the two replicas", after.body["members"])
	}
}

// Nodes made open (by a replica of a version before ACLs, or by anyone while they were) are given
// zkstock's ACL when a replica starts: the fleet's, and the paths to the fleet and to LockRoot.
func TestSecureZKClosesNodesMadeOpen(t *testing.T) {
	servers := testenv.ZKServers(t)
	owner := testenv.ZKConn(t, servers)
	fleetRoot := order.FleetRoot + "/" + testenv.UniqueName(t)
	testenv.DeleteZKTreeAtCleanup(t, servers, fleetRoot)
	open := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/zkstock", "/zkstock/fleets", "/zkstock/locks", order.LockRoot} {
		if _, err := owner.Create(p, nil, 0, open); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
		if _, err := owner.SetACL(p, open, -1); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{fleetRoot, fleetRoot + "/mode", fleetRoot + "/members", fleetRoot + "/barrier"} {
		if _, err := owner.Create(p, []byte("zk"), 0, open); err != nil {
			t.Fatal(err)
		}
	}
	user, password := testenv.ZKAuth()
	c, err := dlock.Connect(t.Context(), servers, dlock.WithDigest(user, password))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := order.SecureZK(t.Context(), c, fleetRoot[len(order.FleetRoot)+1:], slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	want := append(zk.DigestACL(zk.PermAll, user, password), zk.WorldACL(zk.PermRead)...)
	for _, p := range []string{"/zkstock", "/zkstock/fleets", "/zkstock/locks", order.LockRoot, fleetRoot, fleetRoot + "/mode", fleetRoot + "/members", fleetRoot + "/barrier"} {
		acl, _, err := owner.GetACL(p)
		if err != nil || len(acl) != 2 || !slices.Contains(acl, want[0]) || !slices.Contains(acl, want[1]) {
			t.Errorf("%s: ACL %v %v, want %v", p, acl, err, want)
		}
	}
	stranger, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.Set(fleetRoot+"/mode", []byte("none"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("a client without credentials set the mode after SecureZK: %v", err)
	}
}

// A replica of another identity (a wrong password, say) on a fleet zkstock's identity owns cannot
// take the fleet's nodes over: it stops at once with ZooKeeper's refusal, and tries nothing
// again, since no attempt could succeed.
func TestRunStopsAtOnceOnAFleetOfAnotherIdentity(t *testing.T) {
	r := newCluster(t, 1, clusterOpts{})[0]
	var logs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := order.Run(ctx, order.Config{HTTPAddr: "127.0.0.1:0", ReplicaID: "impostor", Fleet: r.Fleet,
		ZKServers: testenv.ZKServers(t), ZKSessionTimeout: 10 * time.Second, ZKAuth: order.ZKAuth{User: ordertest.ZKAuth().User, Password: "wrong"},
		MySQLDSN: r.DSN, LockMode: order.ModeZK, LockTimeout: 5 * time.Second}, slog.New(slog.NewTextHandler(&logs, nil)))
	if !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("Run as another identity = %v, want %v", err, zk.ErrNoAuth)
	}
	if strings.Contains(logs.String(), "trying again") {
		t.Fatalf("a refusal of the identity was tried again:\n%s", logs.String())
	}
	if rep := admin(t, r, "GET", "/admin/lock-mode", ""); rep.status != 200 {
		t.Fatalf("the fleet after the impostor: %d %s", rep.status, rep.raw)
	} else if members, _ := rep.body["members"].([]any); len(members) != 1 {
		t.Fatalf("members %v: want the one replica", rep.body["members"])
	}
}
