package testenv

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// DeleteZKTreeAtCleanup deletes the ZooKeeper tree at path when the test ends (after the cleanups
// registered later, such as the replicas' that hold nodes in it), so that the shared test servers
// do not gather a test's persistent nodes: a fleet's mode, say. A failure to delete is logged only.
func DeleteZKTreeAtCleanup(t testing.TB, servers []string, path string) {
	t.Helper()
	t.Cleanup(func() {
		conn, _, err := zk.Connect(servers, 5*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Logf("delete %s: %v", path, err)
			return
		}
		defer conn.Close()
		if err := deleteTree(conn, path); err != nil {
			t.Logf("delete %s: %v", path, err)
		}
	})
}

func deleteTree(conn *zk.Conn, path string) error {
	kids, _, err := conn.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := deleteTree(conn, path+"/"+k); err != nil {
			return err
		}
	}
	if err := conn.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNotEmpty) {
		return err
	}
	return nil
}
