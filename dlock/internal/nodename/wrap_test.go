package nodename

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// zkName is the name ZooKeeper gives a sequential node: the requested base, then the parent's
// int32 child-change counter formatted %010d (PrepRequestProcessor).
func zkName(base string, counter int32) string { return base + fmt.Sprintf("%010d", counter) }

// counters around both wraps of ZooKeeper's counter: int32's (2147483647 to -2147483648) and the
// unsigned count's (-1 to 0), and where the suffix changes width (-1000000000 to -999999999).
var counters = []int32{0, 1, 999999999, 1000000000, 1234567890, 2147483645, 2147483646, math.MaxInt32,
	math.MinInt32, math.MinInt32 + 1, math.MinInt32 + 2, -1234567890, -1000000001, -1000000000,
	-999999999, -100, -2, -1}

// Every layout's names parse back to the base they were created with and to the counter's
// unsigned value, whatever the counter: the ten-digit form, a minus and ten digits, a minus and
// nine. (Reading the last ten characters took "lock--2147483648" for the base "lock--".)
func TestParseAcrossTheWrap(t *testing.T) {
	for _, l := range Layouts() {
		for _, k := range []Kind{Lock, Read, Write} {
			base, err := l.Base(k)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range counters {
				name := zkName(base, v)
				n, ok := Parse(name)
				if !ok || n.Base != base || n.Seq != int64(uint32(v)) || n.Kind != kindOf(base) {
					t.Errorf("Parse(%q) = %+v, %v; want base %q seq %d", name, n, ok, base, uint32(v))
				}
			}
		}
	}
	// Peers' and older names too, with no GUID.
	for _, base := range []string{"lock-", "__lock__", "__rlock__", "_c_ab-read-", "_c_ab-write-", "x__WRIT__", ""} {
		for _, v := range counters {
			if n, ok := Parse(zkName(base, v)); !ok || n.Base != base || n.Seq != int64(uint32(v)) {
				t.Errorf("Parse(%q) = %+v, %v; want base %q seq %d", zkName(base, v), n, ok, base, uint32(v))
			}
		}
	}
	// No int32 counter formats as these: they are not sequential nodes.
	for _, name := range []string{"lock-2147483648", "lock-9999999999", "lock--000000000", "lock--2147483649"} {
		if n, ok := Parse(name); ok && n.Base == "lock-" {
			t.Errorf("Parse(%q) = %+v, a sequential node of base lock-", name, n)
		}
	}
}

// A queue that spans the wrap is served in creation order: exactly one holder, the oldest, and
// each waiter blocked by everyone created before it. Reading the suffix as the last ten digits,
// or as the signed number ZooKeeper printed, put a node created after the wrap ahead of the
// holder: two holders.
func TestQueueOrderAcrossTheWrap(t *testing.T) {
	for _, start := range []int32{math.MaxInt32 - 5, -1000000003, -3, 1000000000 - 3} {
		for _, l := range Layouts() {
			var created []string
			for i := range int32(8) {
				base, err := l.Base(Lock)
				if err != nil {
					t.Fatal(err)
				}
				created = append(created, zkName(base, start+i)) // int32 arithmetic wraps as ZooKeeper's does
			}
			shuffled := append([]string(nil), created...)
			rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			shuffled = append(shuffled, "config", "lease_holder")
			q := Queue(shuffled)
			if len(q) != len(created) {
				t.Fatalf("start %d: Queue kept %d of %d contenders", start, len(q), len(created))
			}
			holders := 0
			for i, n := range q {
				if n.Name != created[i] {
					t.Fatalf("start %d, layout %d: position %d is %q, want %q (created %d-th)", start, l, i, n.Name, created[i], i)
				}
				b := Blockers(q, n)
				if len(b) == 0 {
					holders++
				}
				if len(b) != i {
					t.Errorf("start %d: %q is blocked by %d nodes, want the %d created before it", start, n.Name, len(b), i)
				}
			}
			if holders != 1 {
				t.Errorf("start %d, layout %d: %d holders", start, l, holders)
			}
			if got := len(NewcomerBlockers(q, Lock)); got != len(q) {
				t.Errorf("start %d: a newcomer waits for %d of %d", start, got, len(q))
			}
		}
	}
}

// Tokens grow from holder to holder across ZooKeeper's int32 wrap (the path's czxid plus the
// unsigned count), and a fixed-name node's stand-in count sits between its neighbours'.
func TestTokenAcrossTheWrap(t *testing.T) {
	const czxid = 0x1_0000_0000 // a path created in the second epoch
	prev := int64(math.MinInt64)
	for v := int32(math.MaxInt32 - 3); v != math.MinInt32+4; v++ {
		n, ok := Parse(zkName("_c_x-lock-", v))
		if !ok {
			t.Fatalf("counter %d: not parsed", v)
		}
		tok := Token(czxid, n.Seq)
		if tok <= prev {
			t.Fatalf("counter %d: token %d not above the previous holder's %d", v, tok, prev)
		}
		prev = tok
	}
	// A fixed node created after N creates reads, while held, Cversion = 2(N+1) - children.
	for _, n := range []int64{0, 1, 7, 1 << 20, 1<<30 - 1, 1 << 30, 1<<31 - 2} {
		for _, children := range []int32{1, 2, 1000} {
			cversion := int32(2*(n+1) - int64(children)) // ZooKeeper's DataNode.copyStat, in int32
			if got := FixedCount(cversion, children); got != n {
				t.Errorf("%d creates before, %d children: FixedCount(%d) = %d, want %d", n, children, cversion, got, n)
			}
		}
	}
}
