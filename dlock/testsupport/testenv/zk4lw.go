package testenv

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// WatchesUnder counts the watches the ZooKeeper server at addr holds on paths that start with
// prefix, from the wchp four-letter word (each watched path, then the sessions watching it).
// wchp lists data watches (getData, exists) only, not child watches (getChildren): it sees every
// watch a lock's waiters and holders set, not QueueChanged's.
func WatchesUnder(t testing.TB, addr, prefix string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("wchp")); err != nil {
		t.Fatal(err)
	}
	n, counting := 0, false
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "/"):
			counting = strings.HasPrefix(line, prefix)
		case counting && strings.TrimSpace(line) != "":
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("wchp from %s: %v", addr, err)
	}
	return n
}
