package dlock

import (
	"fmt"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

// Naming is how a Client names the lock nodes it creates, so that peers of another library on the
// same lock path see them. Whatever the naming, the client reads every library's nodes: every
// child of a lock path whose name ends in ZooKeeper's sequence suffix is a contender, ordered by
// that sequence; a contender is a reader only when its name marks it as one (Curator's
// "__READ__", kazoo's "__rlock__"). The rules live in one place, dlock/internal/nodename.
type Naming int

const (
	// CuratorNaming names nodes as Apache Curator does: a Mutex node as InterProcessMutex's
	// ("_c_<uuid>-lock-<seq>", which go-zookeeper's zk.Lock also reads), RWMutex nodes as
	// InterProcessReadWriteLock's ("_c_<uuid>-__READ__<seq>", "_c_<uuid>-__WRIT__<seq>"). The
	// default.
	CuratorNaming = Naming(nodename.Curator)
	// KazooNaming names nodes as kazoo does: Mutex and writer nodes as Lock and WriteLock's
	// ("<hex>__lock__<seq>"), reader nodes as ReadLock's ("<hex>__rlock__<seq>").
	KazooNaming = Naming(nodename.Kazoo)
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

func (n Naming) layout() nodename.Layout { return nodename.Layout(n) }
