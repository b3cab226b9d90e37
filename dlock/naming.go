package dlock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The naming rules live here and nowhere else (Curator keeps them in its LockInternalsDriver): how
// this client names the nodes it creates, and how it reads the nodes anyone created.
//
// Reading is the same whatever the naming: every child of a lock path whose name ends in
// ZooKeeper's sequence suffix is a contender, ordered by that sequence, whichever library wrote
// it. A contender is a reader only when its name marks it as one; every other one blocks like a
// writer. Children without a sequence suffix are not contenders. So dlock never overlooks a peer;
// whether a peer sees dlock's nodes depends on the naming, which is why it is an option.

// Naming is how a Client names the lock nodes it creates.
type Naming int

const (
	// CuratorNaming names nodes as Apache Curator does: a Mutex node as InterProcessMutex's
	// ("_c_<uuid>-lock-<seq>", which go-zookeeper's zk.Lock also reads), RWMutex nodes as
	// InterProcessReadWriteLock's ("_c_<uuid>-__READ__<seq>", "_c_<uuid>-__WRIT__<seq>"). The
	// default.
	CuratorNaming Naming = iota
	// KazooNaming names nodes as kazoo does: Mutex and writer nodes as Lock and WriteLock's
	// ("<hex>__lock__<seq>"), reader nodes as ReadLock's ("<hex>__rlock__<seq>").
	KazooNaming
)

func (n Naming) String() string {
	switch n {
	case CuratorNaming:
		return "curator"
	case KazooNaming:
		return "kazoo"
	}
	return fmt.Sprintf("Naming(%d)", int(n))
}

type kind string

const (
	kindLock  kind = "lock"  // Mutex, and any exclusive contender not marked as a writer
	kindWrite kind = "write" // RWMutex writer
	kindRead  kind = "read"  // RWMutex reader
)

func (k kind) exclusive() bool { return k != kindRead }

// writing is one naming's layout: the name of a node before ZooKeeper appends the sequence.
type writing struct {
	guid  func() (string, error)
	marks map[kind]string
	base  func(guid, mark string) string
}

var writings = map[Naming]writing{
	CuratorNaming: {
		guid:  newUUID,
		marks: map[kind]string{kindLock: "lock-", kindRead: "__READ__", kindWrite: "__WRIT__"},
		base:  func(guid, mark string) string { return "_c_" + guid + "-" + mark },
	},
	KazooNaming: {
		guid:  newHexGUID,
		marks: map[kind]string{kindLock: "__lock__", kindRead: "__rlock__", kindWrite: "__lock__"},
		base:  func(guid, mark string) string { return guid + mark },
	},
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

// nodeBase is the name this attempt asks ZooKeeper to create; the node's name is nodeBase
// followed by the sequence. Its GUID makes it unique to the attempt ("protected"), so that the
// client can find its node after a lost create reply.
func (n Naming) nodeBase(k kind) (string, error) {
	w, ok := writings[n]
	if !ok {
		return "", fmt.Errorf("dlock: unknown naming %v", n)
	}
	guid, err := w.guid()
	if err != nil {
		return "", err
	}
	return w.base(guid, w.marks[k]), nil
}

// lockNode is one contender in a lock path's queue.
type lockNode struct {
	name string
	base string // name without its sequence: the creating attempt's identity
	kind kind
	seq  int64
}

// parseNode reads a child name; ok is false for anything without a sequence suffix.
func parseNode(name string) (n lockNode, ok bool) {
	if len(name) < seqLen {
		return n, false
	}
	base, suffix := name[:len(name)-seqLen], name[len(name)-seqLen:]
	seq, ok := parseSeq(suffix)
	if !ok {
		return n, false
	}
	return lockNode{name: name, base: base, kind: kindOf(base), seq: seq}, true
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

func kindOf(base string) kind {
	for _, m := range readerMarks {
		if strings.HasSuffix(base, m) {
			return kindRead
		}
	}
	for _, m := range writerMarks {
		if strings.HasSuffix(base, m) {
			return kindWrite
		}
	}
	return kindLock
}

// parseQueue returns the contenders among children, in queue order.
func parseQueue(children []string) []lockNode {
	q := make([]lockNode, 0, len(children))
	for _, name := range children {
		if n, ok := parseNode(name); ok {
			q = append(q, n)
		}
	}
	slices.SortFunc(q, func(a, b lockNode) int { return compareInt(a.seq, b.seq) })
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

// blockers are the nodes ahead of own that keep it from holding the lock, in queue order: every
// earlier node for an exclusive holder, the earlier exclusive ones for a reader. A node carrying
// own's base is own's attempt's too (a create whose reply was lost and that was then tried
// again): it is not in the way, and the caller deletes it.
func blockers(queue []lockNode, own lockNode) []lockNode {
	var out []lockNode
	for _, n := range queue {
		if n.seq >= own.seq {
			break
		}
		if n.base == own.base {
			continue
		}
		if own.kind.exclusive() || n.kind.exclusive() {
			out = append(out, n)
		}
	}
	return out
}

// strays are the nodes of own's attempt other than own: left by a create whose reply was lost.
func strays(queue []lockNode, own lockNode) []lockNode {
	var out []lockNode
	for _, n := range queue {
		if n.base == own.base && n.name != own.name {
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
