package fleet_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// openParent makes a fresh persistent node with an open ACL under /zkstock-test/fleets, so that
// a test whose fleet is protected never creates the shared parents with its ACL (which would shut
// the other tests out of them).
func openParent(t *testing.T, raw *zk.Conn) string {
	t.Helper()
	p := "/zkstock-test/fleets/" + testenv.UniqueName(t)
	testenv.DeleteZKTreeAtCleanup(t, testenv.ZKServers(t), p)
	open := zk.WorldACL(zk.PermAll)
	for _, q := range []string{"/zkstock-test", "/zkstock-test/fleets", p} {
		if _, err := raw.Create(q, nil, 0, open); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", q, err)
		}
	}
	return p
}

// A fleet whose members' client has WithDigest gives every node it makes (its root, the mode, the
// members, the barrier's nodes) the client's ACL: a client without the credentials can read the
// mode and the members, but can neither write the mode nor remove or add a member nor queue at
// the barrier; the fleet's own switch still works.
func TestFleetNodesCarryTheClientsACL(t *testing.T) {
	servers := testenv.ZKServers(t)
	user, password := testenv.ZKAuth()
	owner := testenv.ZKConn(t, servers)
	root := openParent(t, owner) + "/f"
	var ms []member
	for i := range 2 {
		ms = append(ms, join(t, root, fmt.Sprintf("m%d", i+1), servers, nil, dlock.WithDigest(user, password)))
	}
	p, err := ms[1].Enter(ctxFor(t, 5*time.Second)) // a shared hold of the barrier is held meanwhile
	if err != nil {
		t.Fatal(err)
	}
	p.Exit()
	want := dlock.DigestACL(user, password)
	nodes := testenv.ZKTree(t, owner, root)
	for _, sub := range []string{"/mode", "/members", "/members/m1", "/members/m2", "/barrier"} {
		if !slices.Contains(nodes, root+sub) {
			t.Fatalf("nodes %v: no %s", nodes, root+sub)
		}
	}
	for _, n := range nodes {
		acl, _, err := owner.GetACL(n)
		if err != nil || len(acl) != len(want) || !slices.Contains(acl, want[0]) || !slices.Contains(acl, want[1]) {
			t.Errorf("%s: ACL %v %v, want %v", n, acl, err, want)
		}
	}

	stranger, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, _, err := stranger.Get(root + "/mode"); err != nil {
		t.Errorf("a client without the credentials cannot read the mode: %v", err)
	}
	open := zk.WorldACL(zk.PermAll)
	for _, try := range []struct {
		what string
		err  error
	}{
		{"write the mode", func() error { _, err := stranger.Set(root+"/mode", []byte("c"), -1); return err }()},
		{"delete the mode", stranger.Delete(root+"/mode", -1)},
		{"remove a member", stranger.Delete(root+"/members/m2", -1)},
		{"add a member", func() error {
			_, err := stranger.Create(root+"/members/intruder", nil, zk.FlagEphemeral, open)
			return err
		}()},
		{"queue at the barrier", func() error {
			_, err := stranger.Create(root+"/barrier/_c_x-__WRIT__", nil, zk.FlagEphemeralSequential, open)
			return err
		}()},
	} {
		if !errors.Is(try.err, zk.ErrNoAuth) {
			t.Errorf("a client without the credentials could %s: %v (want %v)", try.what, try.err, zk.ErrNoAuth)
		}
	}
	mode, err := ms[0].Switch(ctxFor(t, 15*time.Second), "b", -1)
	if err != nil || mode.Name != "b" {
		t.Fatalf("switch of the protected fleet: %+v %v", mode, err)
	}
	if got, err := ms[1].Current(ctxFor(t, 5*time.Second)); err != nil || got != mode {
		t.Fatalf("the other member reads %+v %v, want %+v", got, err, mode)
	}
}
