package dlock_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

const aclUser, aclPassword = "zkstock", "dlock-acl-test"

// wantACL is the ACL dlock.WithDigest promises: everything to the identity, reading to anyone.
func wantACL(user, password string) []zk.ACL {
	return append(zk.DigestACL(zk.PermAll, user, password), zk.WorldACL(zk.PermRead)...)
}

// openDir makes a fresh persistent directory with an open ACL for a test that protects the nodes
// under it, so that the shared parent (/zkstock-test) is never created with the test's ACL, which
// would shut the other tests out of it. It is deleted when the test ends.
func openDir(t *testing.T, raw *zk.Conn) string {
	t.Helper()
	dir := testenv.UniquePath(t)
	open := zk.WorldACL(zk.PermAll)
	for range 10 { // the container parent may be reaped between the two creates
		if _, err := raw.CreateContainer(dir[:strings.LastIndex(dir, "/")], nil, zk.FlagContainer, open); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
		_, err := raw.Create(dir, nil, 0, open)
		if err == nil {
			t.Cleanup(func() { deleteAll(raw, dir) })
			return dir
		}
		if !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
	}
	t.Fatalf("could not create %s", dir)
	return ""
}

func deleteAll(conn *zk.Conn, p string) {
	kids, _, _ := conn.Children(p)
	for _, k := range kids {
		deleteAll(conn, p+"/"+k)
	}
	_ = conn.Delete(p, -1)
}

func sameACL(a, b []zk.ACL) bool {
	key := func(x zk.ACL) string { return fmt.Sprintf("%s|%s|%d", x.Scheme, x.ID, x.Perms) }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i] = key(a[i])
	}
	for i := range b {
		kb[i] = key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// Every node a client with WithDigest creates, whichever recipe creates it (a Mutex's parents made
// on demand and its node, an RWMutex's reader and writer, LockAll's), carries the digest ACL, and
// a client without the credentials can look but can neither queue, nor take a holder's node away,
// nor write one; a second session of the same identity can.
func TestWithDigestProtectsEveryNode(t *testing.T) {
	servers := testenv.ZKServers(t)
	raw := rawConn(t)
	dir := openDir(t, raw)
	c := connect(t, servers, dlock.WithDigest(aclUser, aclPassword))
	want := wantACL(aclUser, aclPassword)
	if !sameACL(c.ACL(), want) {
		t.Fatalf("client ACL %v, want %v", c.ACL(), want)
	}
	ctx := ctxTimeout(t, 20*time.Second)
	held, err := dlock.NewMutex(c, dir+"/sku/a").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := dlock.NewRWMutex(c, dir+"/rw").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writerGot := make(chan error, 1)
	go func() {
		l, err := dlock.NewRWMutex(connect(t, servers, dlock.WithDigest(aclUser, aclPassword)), dir+"/rw").Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		writerGot <- err
	}()
	both, err := dlock.LockAll(ctx, dlock.NewMutex(c, dir+"/all/x"), dlock.NewMutex(c, dir+"/all/y"))
	if err != nil {
		t.Fatal(err)
	}
	waitNodes(t, raw, dir+"/rw", 2)

	nodes := testenv.ZKTree(t, raw, dir)[1:] // dir itself is the test's, open
	if len(nodes) != 11 {                    // sku, sku/a, its node; rw, its 2 nodes; all, all/x, its node, all/y, its node
		t.Fatalf("nodes %v: want 11", nodes)
	}
	owner := rawConn(t) // ZooKeeper shows a digest ACL's hash only to a client with ADMIN on the node
	if err := owner.AddAuth("digest", []byte(aclUser+":"+aclPassword)); err != nil {
		t.Fatal(err)
	}
	for _, p := range nodes {
		acl, _, err := owner.GetACL(p)
		if err != nil {
			t.Fatal(err)
		}
		if !sameACL(acl, want) {
			t.Errorf("%s has ACL %v, want %v", p, acl, want)
		}
	}

	stranger := rawConn(t)
	holder := dir + "/sku/a/" + lockNodes(t, raw, dir+"/sku/a")[0]
	for _, try := range []struct {
		what string
		err  error
	}{
		{"queue", func() error {
			_, err := stranger.Create(dir+"/sku/a/_c_x-lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
			return err
		}()},
		{"create a lock path", func() error { _, err := stranger.Create(dir+"/sku/b", nil, 0, zk.WorldACL(zk.PermAll)); return err }()},
		{"delete the holder's node", stranger.Delete(holder, -1)},
		{"write the holder's node", func() error { _, err := stranger.Set(holder, []byte("me"), -1); return err }()},
		{"delete the lock path", stranger.Delete(dir+"/sku/a", -1)},
		{"open the ACL", func() error { _, err := stranger.SetACL(dir+"/sku/a", zk.WorldACL(zk.PermAll), -1); return err }()},
	} {
		if !errors.Is(try.err, zk.ErrNoAuth) {
			t.Errorf("a client without the credentials could %s: %v (want %v)", try.what, try.err, zk.ErrNoAuth)
		}
	}
	if _, _, err := stranger.Get(holder); err != nil {
		t.Errorf("a client without the credentials cannot read the holder's node: %v", err)
	}
	if acl, _, err := stranger.GetACL(holder); err != nil || !sameACL(acl, []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: aclUser + ":x"}, zk.WorldACL(zk.PermRead)[0]}) {
		t.Errorf("a client without the credentials reads the ACL as %v, %v: want it with the password's hash hidden", acl, err)
	}
	// A dlock client without them gets the refusal as its error, not a wait.
	if _, err := dlock.NewMutex(connect(t, servers), dir+"/sku/a").Lock(ctxTimeout(t, 5*time.Second)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("lock without the credentials: %v, want %v", err, zk.ErrNoAuth)
	}

	mustUnlock(t, reader)
	if err := <-writerGot; err != nil {
		t.Fatalf("writer of the same identity: %v", err)
	}
	mustUnlock(t, held)
	if err := both.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir + "/sku/a", dir + "/rw", dir + "/all/x", dir + "/all/y"} {
		if nodes := lockNodes(t, raw, p); len(nodes) != 0 {
			t.Errorf("%s: nodes left behind: %v", p, nodes)
		}
	}
}
