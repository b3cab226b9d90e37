package dlock

import (
	"context"
	"errors"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

// A node that carries this attempt's GUID but belongs to another (earlier) session must not be
// taken for the client's own (CURATOR-498): that session's nodes vanish with it.
func TestFindProtectedIgnoresOtherSessions(t *testing.T) {
	c, dir := clientInTestDir(t, "find-protected")
	other := rawInTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.ensureParents(ctx, dir); err != nil {
		t.Fatal(err)
	}
	base, err := nodename.Curator.Base(nodename.Lock)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Create(dir+"/"+base, nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	name, _, err := c.findProtected(ctx, dir, base)
	if err != nil {
		t.Fatal(err)
	}
	if name != "" {
		t.Fatalf("took %s, created by another session, for its own", foreign)
	}
	// Its own node with the same GUID is found.
	own, err := c.conn.Create(dir+"/"+base, nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	name, owner, err := c.findProtected(ctx, dir, base)
	if err != nil || name != own || owner != c.SessionID() {
		t.Fatalf("findProtected = %q, %#x, %v; want %q", name, owner, err, own)
	}
}

// The queue read sent behind a create is trusted only if it shows the created node. One that does
// not (an answer from before the create was applied, or a failed read) is dropped and the queue
// read again: here the stale answer shows an empty queue while a holder is ahead, and the waiter
// must see the holder, not take the lock.
func TestQueueReadWithoutTheNodeIsNotTrusted(t *testing.T) {
	c, dir := clientInTestDir(t, "stale-behind")
	other := rawInTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.ensureParents(ctx, dir); err != nil {
		t.Fatal(err)
	}
	holder, err := other.Create(dir+"/holder-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	// own creates this client's node as createNode does, with a stale read behind it.
	own := func(stale queueRead) *ownNode {
		t.Helper()
		base, err := nodename.Curator.Base(nodename.Lock)
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.conn.Create(dir+"/"+base, nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		node, _ := nodename.Parse(path.Base(p))
		behind := make(chan queueRead, 1)
		behind <- stale
		return &ownNode{dir: dir, path: p, node: node, owner: c.SessionID(), behind: behind}
	}
	empty := queueRead{kids: []string{}, st: &zk.Stat{Czxid: 1}}

	reads := c.Stats().ChildrenCalls
	if _, err := c.waitTurn(ctx, own(empty), true); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock with a holder ahead and a stale empty read: %v, want ErrLocked", err)
	}
	if n := c.Stats().ChildrenCalls - reads; n != 1 {
		t.Fatalf("%d children reads after the stale one, want 1", n)
	}
	if err := other.Delete(holder, -1); err != nil {
		t.Fatal(err)
	}
	for _, stale := range []queueRead{empty, {err: zk.ErrConnectionClosed}} {
		n := own(stale)
		lease, err := c.waitTurn(ctx, n, false)
		if err != nil {
			t.Fatalf("lock with the stale read %+v: %v", stale, err)
		}
		if lease.Token() == 1+n.node.Seq {
			t.Fatalf("token %d taken from the stale read's stat", lease.Token())
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
