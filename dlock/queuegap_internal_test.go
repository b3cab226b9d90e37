package dlock

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// A lock path created just after QueueChanged found it missing, before it watched the nearest
// parent, is a change that parent's watch never sees: QueueChanged looks once more and wakes,
// instead of waiting for an unrelated change beside the path (the live page stalled on a SKU
// whose path was being created when its first stream opened).
func TestQueueChangedSeesAPathCreatedInTheGap(t *testing.T) {
	c, dir := clientInTestDir(t, "queue-gap")
	if err := c.ensureParents(context.Background(), dir+"/x"); err != nil { // dir exists, dir/lock does not
		t.Fatal(err)
	}
	path := dir + "/lock"
	queueWatchGap = func(p string) {
		if _, err := c.conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Errorf("create %s in the gap: %v", p, err)
		}
	}
	t.Cleanup(func() { queueWatchGap = nil })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.QueueChanged(ctx, path); err != nil {
		t.Fatalf("QueueChanged missed the path's creation: %v", err)
	}
}

// clientInTestDir connects a Client to the test ZooKeeper (closed when the test ends) and names a
// fresh directory for the test's paths.
func clientInTestDir(t *testing.T, name string) (*Client, string) {
	t.Helper()
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
	t.Cleanup(func() { _ = c.Close() })
	return c, "/zkstock-test/" + name + "-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
}

// rawInTest is a plain go-zookeeper connection to the test ZooKeeper, for another session's nodes.
func rawInTest(t *testing.T) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(strings.Split(os.Getenv("ZK_SERVERS"), ","), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}
