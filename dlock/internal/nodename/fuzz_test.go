package nodename

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzParse reads arbitrary child names as Parse would meet them under a lock path, whoever wrote
// them: no panic; a name read as a contender splits into its base and ZooKeeper's sequence suffix
// exactly ("%010d" of the int32 counter), its count is that counter modulo 2^32, its kind is a
// reader exactly when the base carries a reader mark, and reading the name rebuilt from its parts
// gives the same node. The seeds (testdata/fuzz/FuzzParse) hold one name of each form: dlock's
// and Curator's mutex, readers and writers, kazoo's, go-zookeeper's zk.Lock, dlock's earlier
// names, a wrapped counter, an ambiguous minus, and names that are not sequential.
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 500000x ./dlock/internal/nodename
func FuzzParse(f *testing.F) {
	f.Add("_c_0f8fad5b-d9cb-469f-a165-70867728950e-lock-0000000007")
	f.Fuzz(func(t *testing.T, name string) {
		n, ok := Parse(name)
		if !ok {
			if n != (Node{}) {
				t.Fatalf("Parse(%q) = %+v, false: want the zero node", name, n)
			}
			return
		}
		if n.Name != name || !strings.HasPrefix(name, n.Base) {
			t.Fatalf("Parse(%q) = %+v: name or base do not match", name, n)
		}
		if n.Seq < 0 || n.Seq > 1<<32-1 {
			t.Fatalf("Parse(%q): count %d is not an unsigned 32-bit count", name, n.Seq)
		}
		suffix := name[len(n.Base):]
		if want := fmt.Sprintf("%010d", int32(uint32(n.Seq))); suffix != want {
			t.Fatalf("Parse(%q): base %q leaves %q, which ZooKeeper writes for count %d as %q", name, n.Base, suffix, n.Seq, want)
		}
		reader := false
		for _, m := range readerMarks {
			reader = reader || strings.HasSuffix(n.Base, m)
		}
		if (n.Kind == Read) != reader || (n.Kind != Read && n.Kind != Write && n.Kind != Lock) {
			t.Fatalf("Parse(%q): kind %q, reader mark %v", name, n.Kind, reader)
		}
		if again, ok := Parse(n.Base + suffix); !ok || again != n {
			t.Fatalf("Parse of the rebuilt name %q = %+v, %v; want %+v", n.Base+suffix, again, ok, n)
		}
		if Compare(n, n) != 0 || len(Blockers([]Node{n}, n)) != 0 || len(Strays([]Node{n}, n)) != 0 {
			t.Fatalf("%+v: a node is neither before, in the way of, nor a stray of itself", n)
		}
	})
}

// FuzzNaming writes the names dlock creates, in every layout and kind, with any counter
// ZooKeeper may append (past its int32 wrap too): each reads back as a contender with the base
// dlock created it with (so dlock finds its own node after a lost reply), the kind it was created
// for (a kazoo writer reads as an exclusive lock: kazoo marks both alike) and the counter modulo
// 2^32; and two such nodes compare as their counters do, modulo 2^32.
//
//	go test -run '^$' -fuzz FuzzNaming -fuzztime 500000x ./dlock/internal/nodename
func FuzzNaming(f *testing.F) {
	f.Add(uint8(0), uint8(0), int32(7), int32(8))
	f.Fuzz(func(t *testing.T, layout, kind uint8, seq, other int32) {
		l := Layouts()[int(layout)%len(Layouts())]
		k := []Kind{Lock, Read, Write}[int(kind)%3]
		base, err := l.Base(k)
		if err != nil {
			t.Fatal(err)
		}
		name := base + fmt.Sprintf("%010d", seq)
		n, ok := Parse(name)
		if !ok || n.Base != base || n.Seq != int64(uint32(seq)) {
			t.Fatalf("layout %d kind %s: Parse(%q) = %+v, %v; want base %q count %d", l, k, name, n, ok, base, uint32(seq))
		}
		if n.Kind.Exclusive() != k.Exclusive() || (l == Curator && n.Kind != k) {
			t.Fatalf("layout %d: %q reads as %s, created as %s", l, name, n.Kind, k)
		}
		o, ok := Parse(base + fmt.Sprintf("%010d", other))
		if !ok {
			t.Fatalf("counter %d: not read", other)
		}
		d := int32(uint32(seq) - uint32(other))
		if got := Compare(n, o); (d < 0) != (got < 0) || (d > 0) != (got > 0) || got != -Compare(o, n) {
			t.Fatalf("Compare(%d, %d) = %d, want the sign of %d", seq, other, got, d)
		}
	})
}
