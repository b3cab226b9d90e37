package nodename

import (
	"strings"
	"testing"
)

func TestParseNode(t *testing.T) {
	hex32 := strings.Repeat("ab", 16)
	uuid := "0f8fad5b-d9cb-469f-a165-70867728950e"
	cases := []struct {
		name string
		ok   bool
		kind Kind
		seq  int64
	}{
		// Curator InterProcessMutex, and go-zookeeper's zk.Lock
		{"_c_" + uuid + "-lock-0000000007", true, Lock, 7},
		{"_c_" + hex32 + "-lock-0000000008", true, Lock, 8},
		// Curator InterProcessReadWriteLock
		{"_c_" + uuid + "-__READ__0000000010", true, Read, 10},
		{"_c_" + uuid + "-__WRIT__0000000011", true, Write, 11},
		// kazoo Lock, WriteLock, ReadLock
		{hex32 + "__lock__0000000012", true, Lock, 12},
		{hex32 + "__rlock__0000000013", true, Read, 13},
		// dlock before it named nodes as its peers do
		{"_c_" + hex32 + "-read-0000000014", true, Read, 14},
		{"_c_" + hex32 + "-write-2147483647", true, Write, 2147483647},
		// anything sequential is a contender, and blocks like a writer unless marked a reader
		{"lock-0000000001", true, Lock, 1},
		{"_c_nothex-lock-0000000002", true, Lock, 2},
		{"_c_" + hex32 + "-other-0000000003", true, Lock, 3},
		{"0000000004", true, Lock, 4},
		// a wrapped counter: %010d of a negative number
		{"_c_" + uuid + "-lock--000000001", true, Lock, 1<<32 - 1},
		// not sequential: not contenders
		{"_c_" + hex32 + "-lock-12", false, "", 0},
		{"config", false, "", 0},
		{"lease_holder", false, "", 0},
		{"x-00000000a1", false, "", 0},
		{"--00000001", false, "", 0},
	}
	for _, c := range cases {
		n, ok := Parse(c.name)
		if ok != c.ok || (ok && (n.Kind != c.kind || n.Seq != c.seq)) {
			t.Errorf("Parse(%q) = %+v, %v; want kind %q seq %d ok %v", c.name, n, ok, c.kind, c.seq, c.ok)
		}
	}
}

// Every naming's nodes read back as the kind they were written for, with the base they were
// created with: the own-node rule and the reader rule agree with the writing rule.
func TestNamingsReadBack(t *testing.T) {
	for _, naming := range Layouts() {
		for _, k := range []Kind{Lock, Read, Write} {
			base, err := naming.Base(k)
			if err != nil {
				t.Fatal(err)
			}
			n, ok := Parse(base + "0000000042")
			want := k
			if naming == Kazoo && k == Write {
				want = Lock // kazoo's WriteLock and Lock share one name
			}
			if !ok || n.Kind != want || n.Base != base || n.Seq != 42 {
				t.Errorf("%d %s: %q read as %+v, %v", int(naming), k, base, n, ok)
			}
			if other, _ := naming.Base(k); other == base {
				t.Errorf("%d: two attempts got the same protected name %q", int(naming), base)
			}
		}
	}
}

func TestBlockers(t *testing.T) {
	q := []Node{{Name: "a", Base: "a", Kind: Read, Seq: 1}, {Name: "b", Base: "b", Kind: Write, Seq: 2},
		{Name: "c", Base: "c", Kind: Read, Seq: 3}, {Name: "d", Base: "d", Kind: Read, Seq: 4}, {Name: "e", Base: "e", Kind: Write, Seq: 5}}
	names := func(ns []Node) (s string) {
		for _, n := range ns {
			s += n.Name
		}
		return s
	}
	if got := names(Blockers(q, q[3])); got != "b" {
		t.Errorf("reader d is blocked by %q, want the writer b only", got)
	}
	if got := names(Blockers(q, q[4])); got != "abcd" {
		t.Errorf("writer e is blocked by %q, want everyone ahead", got)
	}
	if got := names(Blockers(q, q[0])); got != "" {
		t.Errorf("first reader is blocked by %q", got)
	}
	// A second node of the same attempt (a retried create) is not in the way; Strays names it.
	own := Node{Name: "f", Base: "mine", Kind: Write, Seq: 7}
	q2 := append(q[:len(q):len(q)], Node{Name: "s", Base: "mine", Kind: Write, Seq: 6}, own)
	if got := names(Blockers(q2, own)); got != "abcde" {
		t.Errorf("writer f with its own stray s ahead is blocked by %q, want abcde", got)
	}
	if got := names(Strays(q2, own)); got != "s" {
		t.Errorf("strays = %q, want s", got)
	}
	// Queue orders by sequence, whatever the names, and drops what is not sequential.
	got := Queue([]string{"x__lock__0000000003", "config", "_c_0f8fad5b-d9cb-469f-a165-70867728950e-lock-0000000001", "b__rlock__0000000002"})
	if names(got) != "_c_0f8fad5b-d9cb-469f-a165-70867728950e-lock-0000000001b__rlock__0000000002x__lock__0000000003" {
		t.Errorf("Queue = %v", got)
	}
}
