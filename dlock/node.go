package dlock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Lock node names are "_c_<32 hex GUID>-<kind>-<10 digit sequence>". The GUID prefix (a
// "protected" name, as in Curator and go-zookeeper) lets a client find its own node after a
// connection loss hid the create's reply. Mutex nodes use the kind "lock", the same layout as
// go-zookeeper's zk.Lock, so the two queue together on one path.
const (
	protectedPrefix = "_c_"
	guidLen         = 32
	seqLen          = 10
)

type kind string

const (
	kindLock  kind = "lock"  // Mutex
	kindWrite kind = "write" // RWMutex writer
	kindRead  kind = "read"  // RWMutex reader
)

func (k kind) exclusive() bool { return k != kindRead }

// lockNode is one parsed child of a lock path.
type lockNode struct {
	name string
	guid string
	kind kind
	seq  int64
}

func newGUID() (string, error) {
	var b [guidLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("dlock: node GUID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func nodePrefix(guid string, k kind) string {
	return protectedPrefix + guid + "-" + string(k) + "-"
}

// parseNode reads a child name; ok is false for anything that is not a lock node, which the
// recipes ignore rather than fail on (other tools may keep their own nodes under a lock path).
func parseNode(name string) (n lockNode, ok bool) {
	rest, found := strings.CutPrefix(name, protectedPrefix)
	if !found || len(rest) < guidLen+1 || rest[guidLen] != '-' {
		return n, false
	}
	guid := rest[:guidLen]
	if _, err := hex.DecodeString(guid); err != nil {
		return n, false
	}
	k, seqStr, found := strings.Cut(rest[guidLen+1:], "-")
	if !found || len(seqStr) != seqLen {
		return n, false
	}
	switch kind(k) {
	case kindLock, kindWrite, kindRead:
	default:
		return n, false
	}
	seq, err := strconv.ParseInt(seqStr, 10, 64)
	if err != nil || seq < 0 {
		return n, false
	}
	return lockNode{name: name, guid: guid, kind: kind(k), seq: seq}, true
}

// parseQueue returns the lock nodes among children, in queue order.
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
// earlier node for an exclusive holder, the earlier exclusive ones for a reader.
func blockers(queue []lockNode, own lockNode) []lockNode {
	var out []lockNode
	for _, n := range queue {
		if n.seq >= own.seq {
			break
		}
		if own.kind.exclusive() || n.kind.exclusive() {
			out = append(out, n)
		}
	}
	return out
}
