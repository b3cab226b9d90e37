// Package nodename holds the rules for naming ZooKeeper lock nodes and reading them, in one
// place (Curator keeps them in its LockInternalsDriver): how a recipe names the nodes it creates,
// and how it reads the nodes anyone created, whichever library that was.
//
// Reading is the same whatever the layout: every child of a lock path whose name ends in
// ZooKeeper's sequence suffix is a contender, ordered by that sequence. A contender is a reader
// only when its name marks it as one; every other one blocks like a writer. Children without a
// sequence suffix are not contenders.
package nodename

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Kind is what a contender takes.
type Kind string

const (
	Lock  Kind = "lock"  // a mutex, and any exclusive contender not marked as a writer
	Write Kind = "write" // a read/write lock's writer
	Read  Kind = "read"  // a read/write lock's reader
)

// Exclusive reports whether the kind excludes every other holder.
func (k Kind) Exclusive() bool { return k != Read }

// Layout is one library's way of naming the nodes it creates.
type Layout int

const (
	// Curator: "_c_<uuid>-lock-<seq>" (InterProcessMutex, and zk.Lock reads it),
	// "_c_<uuid>-__READ__<seq>", "_c_<uuid>-__WRIT__<seq>" (InterProcessReadWriteLock).
	Curator Layout = iota
	// Kazoo: "<hex>__lock__<seq>" (Lock, WriteLock), "<hex>__rlock__<seq>" (ReadLock).
	Kazoo
)

type writing struct {
	guid  func() (string, error)
	marks map[Kind]string
	base  func(guid, mark string) string
}

var writings = map[Layout]writing{
	Curator: {
		guid:  newUUID,
		marks: map[Kind]string{Lock: "lock-", Read: "__READ__", Write: "__WRIT__"},
		base:  func(guid, mark string) string { return "_c_" + guid + "-" + mark },
	},
	Kazoo: {
		guid:  newHexGUID,
		marks: map[Kind]string{Lock: "__lock__", Read: "__rlock__", Write: "__lock__"},
		base:  func(guid, mark string) string { return guid + mark },
	},
}

// Valid reports whether l is a layout this package knows.
func (l Layout) Valid() bool {
	_, ok := writings[l]
	return ok
}

// Layouts are every layout, for tests.
func Layouts() []Layout { return []Layout{Curator, Kazoo} }

// Base is the name an attempt asks ZooKeeper to create; the node's name is Base followed by the
// sequence. Its GUID makes it unique to the attempt ("protected"), so that the creator can find
// its node after a lost create reply.
func (l Layout) Base(k Kind) (string, error) {
	w, ok := writings[l]
	if !ok {
		return "", fmt.Errorf("unknown node name layout %d", int(l))
	}
	guid, err := w.guid()
	if err != nil {
		return "", err
	}
	return w.base(guid, w.marks[k]), nil
}

// readerMarks and writerMarks are what a name carries just before its sequence to say what it is:
// Curator's, kazoo's, and those of dlock before it named nodes as its peers do ("_c_<hex>-read-").
// Only the reader marks change behaviour; writerMarks only label the queue for people.
var (
	readerMarks = []string{"__READ__", "__rlock__", "-read-"}
	writerMarks = []string{"__WRIT__", "-write-"}
)

// Node is one contender in a lock path's queue.
type Node struct {
	Name string
	Base string // Name without its sequence: the creating attempt's identity
	Kind Kind
	// Seq is ZooKeeper's sequence number read as the unsigned 32-bit count it is: the number of
	// children created under the lock path before this one, modulo 2^32. ZooKeeper
	// formats it from a signed int32, so past 2147483647 the names carry -2147483648 and count up
	// to -1; those read here as 2147483648 to 4294967295. Order nodes with Compare, not by Seq.
	Seq int64
}

// Parse reads a child name; ok is false for anything without a sequence suffix.
func Parse(name string) (n Node, ok bool) {
	base, seq, ok := splitSeq(name)
	if !ok {
		return n, false
	}
	return Node{Name: name, Base: base, Kind: kindOf(base), Seq: int64(uint32(seq))}, true
}

// splitSeq splits ZooKeeper's sequence suffix off a name. ZooKeeper appends the parent's int32
// count of child creates formatted %010d: ten digits (0000000000 to 2147483647) until the counter
// wraps, then a minus and ten digits (-2147483648 to -1000000000), then a minus and nine
// (-999999999 to -000000001), then ten digits again.
//
// A minus followed by ten digits is ambiguous: "lock-1234567890" is the base "lock-" with the
// positive 1234567890 (the counter before the wrap), but "x-1234567890" could also be the base
// "x" with -1234567890 (after it). Every layout this package knows ends its mark in '-' or '_'
// ("lock-", "-read-", "__READ__", "__lock__", ...), so the minus is a sign exactly when the
// character before it is '-' or '_' (Curator's wrapped "lock--1234567890", kazoo's
// "__lock__-1234567890"), or when nothing precedes it, or when the digits exceed any positive
// int32 (2147483648). Otherwise it belongs to the base and the number is positive. A library
// whose bases end in a letter or digit would, after the wrap, have its nodes of -1000000000 and
// below read as positive: none of the known ones does.
func splitSeq(name string) (base string, seq int32, ok bool) {
	const width = 10
	if len(name) < width {
		return "", 0, false
	}
	cut := len(name) - width
	tail := name[cut:]
	if tail[0] == '-' {
		v, ok := digits(tail[1:])
		if !ok || v == 0 {
			return "", 0, false
		}
		return name[:cut], int32(-int64(v)), true
	}
	v, ok := digits(tail)
	if !ok {
		return "", 0, false
	}
	if cut > 0 && name[cut-1] == '-' && v >= 1e9 && v <= 1<<31 {
		before := name[:cut-1]
		if v > math.MaxInt32 || before == "" || strings.HasSuffix(before, "-") || strings.HasSuffix(before, "_") {
			return before, int32(-int64(v)), true
		}
	}
	if v > math.MaxInt32 {
		return "", 0, false // no int32 counter formats so: not a sequential node's name
	}
	return name[:cut], int32(v), true
}

// digits reads a run of ASCII digits; ok is false if anything else is in s.
func digits(s string) (v uint64, ok bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + uint64(s[i]-'0')
	}
	return v, true
}

func kindOf(base string) Kind {
	for _, m := range readerMarks {
		if strings.HasSuffix(base, m) {
			return Read
		}
	}
	for _, m := range writerMarks {
		if strings.HasSuffix(base, m) {
			return Write
		}
	}
	return Lock
}

// Queue returns the contenders among children, in queue order (see Compare).
func Queue(children []string) []Node {
	q := make([]Node, 0, len(children))
	for _, name := range children {
		if n, ok := Parse(name); ok {
			q = append(q, n)
		}
	}
	slices.SortFunc(q, Compare)
	return q
}

// Compare orders two contenders of one lock path by when they were created: negative when a
// came first. It compares their 32-bit sequence counts the way RFC 1982 compares serial numbers:
// a is earlier when b - a, taken modulo 2^32, is below 2^31. So the order stays right across
// ZooKeeper's wrap from 2147483647 to -2147483648, and across the unsigned count's wrap from
// 4294967295 to 0, as long as the live queue spans fewer than 2^31 child creates of the path:
// then every pair of contenders is less than 2^31 apart, the relation is a total order on them,
// and it agrees with creation order. (A span of 2^31 would take a node that stays in the queue
// while two billion others are created behind it.) Comparing the numbers themselves,
// signed as ZooKeeper writes them, would put the first node after the wrap ahead of the holder:
// two holders at once.
func Compare(a, b Node) int {
	switch d := int32(uint32(a.Seq) - uint32(b.Seq)); {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return strings.Compare(a.Name, b.Name) // one path never gives two nodes the same number
}

// Blockers are the nodes ahead of own that keep it from holding the lock, in queue order: every
// earlier node for an exclusive holder, the earlier exclusive ones for a reader. A node carrying
// own's base is own's attempt's too (a create whose reply was lost and that was then tried
// again): it is not in the way, and the caller deletes it.
func Blockers(queue []Node, own Node) []Node {
	var out []Node
	for _, n := range queue {
		if Compare(n, own) >= 0 {
			break
		}
		if n.Base == own.Base {
			continue
		}
		if own.Kind.Exclusive() || n.Kind.Exclusive() {
			out = append(out, n)
		}
	}
	return out
}

// NewcomerBlockers are the nodes that a node of kind k created now would wait for: all of the
// queue for an exclusive kind, its exclusive nodes for a reader.
func NewcomerBlockers(queue []Node, k Kind) []Node {
	var out []Node
	for _, n := range queue {
		if k.Exclusive() || n.Kind.Exclusive() {
			out = append(out, n)
		}
	}
	return out
}

// Token is the fencing token of a holding: the lock path's creation zxid plus the sequence count
// of the holding's node (Node.Seq, or FixedCount for a node without a sequence). Every ZooKeeper
// recipe of this module issues its tokens by this one rule, so that a lock path may change
// recipes between holders and a fence that remembers the largest token still admits the rightful
// holder and refuses a stale one.
//
// Why the next holder's token is always larger. ZooKeeper numbers a sequential node with the
// count of children created under the path before it, N (its internal cversion; the Cversion a
// Stat reports is another number, see FixedCount). Each of those N creates was a transaction of
// its own, with a zxid above the path's creation zxid czxid, so the node's own create, the
// (N+1)th, has a zxid of at least czxid + N + 1: the token czxid + N lies below the zxid of the
// transaction that created the node. Hence:
//   - within one incarnation of the path, holders follow queue order, which is creation order,
//     so N, and the token, grows from holder to holder;
//   - a later incarnation (containers are deleted when empty and created again) has a czxid above
//     every zxid of the earlier one, so above every token of it; zxids only grow, across leader
//     changes too.
//
// For how long. Seq is N modulo 2^32 (see Node.Seq): ZooKeeper's int32 wrap to -2147483648, after
// 2^31 creates, is read as 2147483648, so tokens keep growing across it. They grow until one
// incarnation of the path has seen 2^32 creates, one per lock attempt; then the count restarts at
// 0 and tokens fall by 2^32. A fence then refuses every holder of that path (it never admits a
// stale one) until the path goes idle and is created anew. At 5,000 attempts a second on one
// path that is never empty when ZooKeeper checks its containers, that is ten days.
func Token(dirCzxid, seq int64) int64 { return dirCzxid + seq }

// FixedCount stands in for N in Token for a node without a sequence number (the teaching recipes'
// fixed name), from the lock path's Stat read after the node's create and before its delete.
//
// ZooKeeper counts creates C internally, and reports Cversion = 2·C − NumChildren (every create
// whose node is gone was matched by a delete), in an int32: so (Cversion + NumChildren) / 2,
// computed modulo 2^32, is C modulo 2^31. C − 1 is at least N, the count before this node's
// create (which is among those counted; a create that fails because the node exists counts
// nothing), so the token is above every earlier holder's. It is below the number of any node
// created after the delete, so below every later holder's as long as holdings do not overlap:
// the fixed-name recipes and the sequential ones do not see each other's nodes, so a path passes
// from one to the other only through an empty queue. And C creates with zxids above czxid had
// been made, so the token lies below the zxid of one of them, as the proof above needs.
//
// Because the doubling drops C's top bit, these tokens agree with the sequential recipes' only
// until the path's 2^31st create, where ZooKeeper's own numbers turn negative; past it they fall
// by 2^31 and a fence refuses them until the path is created anew.
func FixedCount(cversion, numChildren int32) int64 {
	return int64((uint32(cversion)+uint32(numChildren))/2) - 1
}

// Strays are the nodes of own's attempt other than own: left by a create whose reply was lost.
func Strays(queue []Node, own Node) []Node {
	var out []Node
	for _, n := range queue {
		if n.Base == own.Base && n.Name != own.Name {
			out = append(out, n)
		}
	}
	return out
}

// newUUID is a random (version 4) UUID in Java's layout, as Curator puts in its node names.
func newUUID() (string, error) {
	b, err := randomUUID()
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], err
}

// newHexGUID is the same UUID as 32 hex digits, as kazoo's uuid4().hex.
func newHexGUID() (string, error) {
	b, err := randomUUID()
	return hex.EncodeToString(b[:]), err
}

func randomUUID() (b [16]byte, err error) {
	if _, err := rand.Read(b[:]); err != nil {
		return b, fmt.Errorf("dlock: node GUID: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return b, nil
}
