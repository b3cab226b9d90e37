package dlock

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

// A node that carries this attempt's GUID but belongs to another (earlier) session must not be
// taken for the client's own (CURATOR-498): that session's nodes vanish with it.
func TestFindProtectedIgnoresOtherSessions(t *testing.T) {
	servers := os.Getenv("ZK_SERVERS")
	if servers == "" {
		t.Skip("ZK_SERVERS not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, strings.Split(servers, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other, _, err := zk.Connect(strings.Split(servers, ","), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	dir := "/zkstock-test/find-protected-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
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
