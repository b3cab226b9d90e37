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
	hex32 := strings.Repeat("ab", 16)
	uuid := "0f8fad5b-d9cb-469f-a165-70867728950e"
	cases := []struct {
		name string
		ok   bool
		kind kind
		seq  int64
	}{
		// Curator InterProcessMutex, and go-zookeeper's zk.Lock
		{"_c_" + uuid + "-lock-0000000007", true, kindLock, 7},
		{"_c_" + hex32 + "-lock-0000000008", true, kindLock, 8},
		// Curator InterProcessReadWriteLock
		{"_c_" + uuid + "-__READ__0000000010", true, kindRead, 10},
		{"_c_" + uuid + "-__WRIT__0000000011", true, kindWrite, 11},
		// kazoo Lock, WriteLock, ReadLock
		{hex32 + "__lock__0000000012", true, kindLock, 12},
		{hex32 + "__rlock__0000000013", true, kindRead, 13},
		// dlock before it named nodes as its peers do
		{"_c_" + hex32 + "-read-0000000014", true, kindRead, 14},
		{"_c_" + hex32 + "-write-2147483647", true, kindWrite, 2147483647},
		// anything sequential is a contender, and blocks like a writer unless marked a reader
		{"lock-0000000001", true, kindLock, 1},
		{"_c_nothex-lock-0000000002", true, kindLock, 2},
		{"_c_" + hex32 + "-other-0000000003", true, kindLock, 3},
		{"0000000004", true, kindLock, 4},
		// a wrapped counter: %010d of a negative number
		{"_c_" + uuid + "-lock--000000001", true, kindLock, -1},
		// not sequential: not contenders
		{"_c_" + hex32 + "-lock-12", false, "", 0},
		{"config", false, "", 0},
		{"lease_holder", false, "", 0},
		{"x-00000000a1", false, "", 0},
		{"--00000001", false, "", 0},
	}
	for _, c := range cases {
		n, ok := parseNode(c.name)
		if ok != c.ok || (ok && (n.kind != c.kind || n.seq != c.seq)) {
			t.Errorf("parseNode(%q) = %+v, %v; want kind %q seq %d ok %v", c.name, n, ok, c.kind, c.seq, c.ok)
		}
	}
}

// Every naming's nodes read back as the kind they were written for, with the base they were
// created with: the own-node rule and the reader rule agree with the writing rule.
func TestNamingsReadBack(t *testing.T) {
	for naming := range writings {
		for _, k := range []kind{kindLock, kindRead, kindWrite} {
			base, err := naming.nodeBase(k)
			if err != nil {
				t.Fatal(err)
			}
			n, ok := parseNode(base + "0000000042")
			want := k
			if naming == KazooNaming && k == kindWrite {
				want = kindLock // kazoo's WriteLock and Lock share one name
			}
			if !ok || n.kind != want || n.base != base || n.seq != 42 {
				t.Errorf("%v %s: %q read as %+v, %v", naming, k, base, n, ok)
			}
			if other, _ := naming.nodeBase(k); other == base {
				t.Errorf("%v: two attempts got the same protected name %q", naming, base)
			}
		}
	}
}

func TestBlockers(t *testing.T) {
	q := []lockNode{{name: "a", base: "a", kind: kindRead, seq: 1}, {name: "b", base: "b", kind: kindWrite, seq: 2},
		{name: "c", base: "c", kind: kindRead, seq: 3}, {name: "d", base: "d", kind: kindRead, seq: 4}, {name: "e", base: "e", kind: kindWrite, seq: 5}}
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
	// A second node of the same attempt (a retried create) is not in the way; strays names it.
	own := lockNode{name: "f", base: "mine", kind: kindWrite, seq: 7}
	q2 := append(q[:len(q):len(q)], lockNode{name: "s", base: "mine", kind: kindWrite, seq: 6}, own)
	if got := names(blockers(q2, own)); got != "abcde" {
		t.Errorf("writer f with its own stray s ahead is blocked by %q, want abcde", got)
	}
	if got := names(strays(q2, own)); got != "s" {
		t.Errorf("strays = %q, want s", got)
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
	base, err := CuratorNaming.nodeBase(kindLock)
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
