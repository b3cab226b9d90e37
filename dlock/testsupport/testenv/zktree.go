package testenv

import (
	"errors"
	"fmt"
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
		conn, err := connectAs(servers)
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

// ZKConn is a plain go-zookeeper connection authenticated as zkstock (ZKAuth), for a test that
// writes or deletes zkstock's nodes itself; the test closes it when it ends.
func ZKConn(t testing.TB, servers []string) *zk.Conn {
	t.Helper()
	conn, err := connectAs(servers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

func connectAs(servers []string) (*zk.Conn, error) {
	conn, _, err := zk.Connect(servers, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	user, password := ZKAuth()
	if err := conn.AddAuth("digest", []byte(user+":"+password)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("zookeeper digest auth: %w", err)
	}
	return conn, nil
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

// ZKTree lists path and every node under it, path first, each parent before its children.
func ZKTree(t testing.TB, conn *zk.Conn, path string) []string {
	t.Helper()
	kids, _, err := conn.Children(path)
	if err != nil {
		t.Fatalf("children %s: %v", path, err)
	}
	out := []string{path}
	for _, k := range kids {
		out = append(out, ZKTree(t, conn, path+"/"+k)...)
	}
	return out
}
