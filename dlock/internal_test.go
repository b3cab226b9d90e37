package dlock

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestParseNode(t *testing.T) {
	guid := strings.Repeat("ab", 16)
	cases := []struct {
		name string
		ok   bool
		kind kind
		seq  int64
	}{
		{"_c_" + guid + "-lock-0000000007", true, kindLock, 7},
		{"_c_" + guid + "-read-0000000010", true, kindRead, 10},
		{"_c_" + guid + "-write-2147483647", true, kindWrite, 2147483647},
		{"lock-0000000001", false, "", 0},
		{"_c_" + guid + "-lock-12", false, "", 0},
		{"_c_" + guid + "-other-0000000001", false, "", 0},
		{"_c_" + strings.Repeat("zz", 16) + "-lock-0000000001", false, "", 0},
		{"_c_" + guid + "-lock--000000001", false, "", 0},
		{"config", false, "", 0},
	}
	for _, c := range cases {
		n, ok := parseNode(c.name)
		if ok != c.ok || (ok && (n.kind != c.kind || n.seq != c.seq)) {
			t.Errorf("parseNode(%q) = %+v, %v", c.name, n, ok)
		}
	}
}

func TestBlockers(t *testing.T) {
	q := []lockNode{{name: "a", kind: kindRead, seq: 1}, {name: "b", kind: kindWrite, seq: 2},
		{name: "c", kind: kindRead, seq: 3}, {name: "d", kind: kindRead, seq: 4}, {name: "e", kind: kindWrite, seq: 5}}
	names := func(ns []lockNode) (s string) {
		for _, n := range ns {
			s += n.name
		}
		return s
	}
	if got := names(blockers(q, q[3])); got != "b" {
		t.Errorf("reader d is blocked by %q, want the writer b only", got)
	}
	if got := names(blockers(q, q[4])); got != "abcd" {
		t.Errorf("writer e is blocked by %q, want everyone ahead", got)
	}
	if got := names(blockers(q, q[0])); got != "" {
		t.Errorf("first reader is blocked by %q", got)
	}
}

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
	guid, _ := newGUID()
	foreign, err := other.Create(dir+"/"+nodePrefix(guid, kindLock), nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	name, _, err := c.findProtected(ctx, dir, guid)
	if err != nil {
		t.Fatal(err)
	}
	if name != "" {
		t.Fatalf("took %s, created by another session, for its own", foreign)
	}
	// Its own node with the same GUID is found.
	own, err := c.conn.Create(dir+"/"+nodePrefix(guid, kindLock), nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	name, owner, err := c.findProtected(ctx, dir, guid)
	if err != nil || name != own || owner != c.SessionID() {
		t.Fatalf("findProtected = %q, %#x, %v; want %q", name, owner, err, own)
	}
}
