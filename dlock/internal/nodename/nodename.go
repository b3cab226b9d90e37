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
	"slices"
	"strconv"
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

// seqLen is the length of ZooKeeper's sequence suffix: %010d of a signed 32-bit counter.
const seqLen = 10

// Node is one contender in a lock path's queue.
type Node struct {
	Name string
	Base string // Name without its sequence: the creating attempt's identity
	Kind Kind
	Seq  int64
}

// Parse reads a child name; ok is false for anything without a sequence suffix.
func Parse(name string) (n Node, ok bool) {
	if len(name) < seqLen {
		return n, false
	}
	base, suffix := name[:len(name)-seqLen], name[len(name)-seqLen:]
	seq, ok := parseSeq(suffix)
	if !ok {
		return n, false
	}
	return Node{Name: name, Base: base, Kind: kindOf(base), Seq: seq}, true
}

// parseSeq reads ZooKeeper's sequence suffix: ten digits, or a minus and nine once the counter
// has wrapped.
func parseSeq(s string) (int64, bool) {
	digits := s
	if strings.HasPrefix(s, "-") {
		digits = s[1:]
	}
	if digits == "" || strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, false
	}
	seq, err := strconv.ParseInt(s, 10, 64)
	return seq, err == nil
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

// Queue returns the contenders among children, in queue order.
func Queue(children []string) []Node {
	q := make([]Node, 0, len(children))
	for _, name := range children {
		if n, ok := Parse(name); ok {
			q = append(q, n)
		}
	}
	slices.SortFunc(q, func(a, b Node) int { return compareInt(a.Seq, b.Seq) })
	return q
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Blockers are the nodes ahead of own that keep it from holding the lock, in queue order: every
// earlier node for an exclusive holder, the earlier exclusive ones for a reader. A node carrying
// own's base is own's attempt's too (a create whose reply was lost and that was then tried
// again): it is not in the way, and the caller deletes it.
func Blockers(queue []Node, own Node) []Node {
	var out []Node
	for _, n := range queue {
		if n.Seq >= own.Seq {
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
