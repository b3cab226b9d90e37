package sale

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zkstock/zkstock/inventory"
)

// LockMode is how changes are coordinated between replicas: a row of the table below.
type LockMode string

// The lock modes, in the order the docs show them.
const (
	ModeZK         LockMode = "zk"          // fair ZooKeeper lock + fenced deduction (default)
	ModeZKUnfenced LockMode = "zk-unfenced" // the lock alone
	ModeNone       LockMode = "none"        // no lock: the unsafe read-modify-write that oversells

	// The strategies of the comparison; they add to the three above.
	ModeZKHerd      LockMode = "zk-herd"      // the herd ZooKeeper recipe + fenced deduction
	ModeDBForUpdate LockMode = "db-forupdate" // SELECT ... FOR UPDATE in the transaction, no ZooKeeper
	ModeDBCAS       LockMode = "db-cas"       // one conditional UPDATE, no ZooKeeper
	ModeDBLockTable LockMode = "db-locktable" // a lock row in table_locks with an expiry, no ZooKeeper
	ModeZKBatch     LockMode = "zk-batch"     // purchases coalesced per replica, one lease per batch
	ModeRedis       LockMode = "redis"        // go-redsync lock with a watchdog, unfenced deduction
	ModeRedisFenced LockMode = "redis-fenced" // the Redis lock with a token issued with it, fenced deduction
)

// LockModes lists the modes in the order the docs show them: the rows of the table.
var LockModes = func() []LockMode {
	names := make([]LockMode, len(modeTable))
	for i, lm := range modeTable {
		names[i] = lm.name
	}
	return names
}()

// ParseLockMode accepts one of LockModes.
func ParseLockMode(s string) (LockMode, error) {
	for _, m := range LockModes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown lock mode %q (want one of %s)", s, JoinModes())
}

// JoinModes is LockModes, comma-separated, for usage texts.
func JoinModes() string {
	parts := make([]string, len(LockModes))
	for i, m := range LockModes {
		parts[i] = string(m)
	}
	return strings.Join(parts, ", ")
}

// lockMode is one row of the table of lock modes: all that a mode means, for a purchase, a cart
// and a cancellation alike.
type lockMode struct {
	name LockMode
	// lock takes the locks of a sorted set of distinct SKUs (one, for a purchase), all or
	// nothing; nil for the modes that take none and leave the protection to the database.
	lock func(e *Engine, ctx context.Context, skus []string) (holding, error)
	// needsRedis: the mode's lock is kept in Redis; a replica without REDIS_ADDR cannot run it.
	needsRedis bool
	// protect is how the inventory change protects itself under the lock.
	protect inventory.Mode
	// issuer issued the lock's tokens, which the fence checks (protect == Fenced).
	issuer inventory.Issuer
	// batched: single purchases queue for the SKU's batcher, whose batches run through the same
	// dispatch (run) and settle as every change, many purchases under one holding of the lock.
	batched bool
	// fleetQueue: each purchase waits in the SKU's lock queue in ZooKeeper (lockPath), where
	// admission reads the whole fleet's queue (fleetqueue.go).
	fleetQueue bool
	// repairStale runs when the fence refused the lock's token: it brings the issuer up to the
	// fence and says whether to try once more with a new lock.
	repairStale func(e *Engine, ctx context.Context, skus []string, log Log) bool
}

// modeTable is every lock mode, in the order the docs show them. Later modes add to it.
var modeTable = []lockMode{
	{name: ModeZK, lock: (*Engine).zkLocks, protect: inventory.Fenced, issuer: inventory.IssuerZooKeeper, fleetQueue: true},
	{name: ModeZKUnfenced, lock: (*Engine).zkLocks, protect: inventory.Unfenced, fleetQueue: true},
	{name: ModeNone, protect: inventory.Unsafe},
	{name: ModeZKHerd, lock: (*Engine).herdLocks, protect: inventory.Fenced, issuer: inventory.IssuerZooKeeper, fleetQueue: true},
	{name: ModeDBForUpdate, protect: inventory.ForUpdate},
	{name: ModeDBCAS, protect: inventory.CAS},
	{name: ModeDBLockTable, lock: (*Engine).tableLocks, protect: inventory.Unfenced},
	{name: ModeZKBatch, lock: (*Engine).zkLocks, protect: inventory.Fenced, issuer: inventory.IssuerZooKeeper,
		batched: true},
	{name: ModeRedis, lock: (*Engine).redisUnfencedLocks, needsRedis: true, protect: inventory.Unfenced},
	{name: ModeRedisFenced, lock: (*Engine).redisFencedLocks, needsRedis: true, protect: inventory.Fenced, issuer: inventory.IssuerRedis,
		repairStale: (*Engine).raiseRedisTokens},
}

// errUnknownMode: a mode that is not in the table. It is never run as another.
var errUnknownMode = errors.New("unknown lock mode")

// modeOf is a mode's row.
func modeOf(m LockMode) (lockMode, error) {
	for _, lm := range modeTable {
		if lm.name == m {
			return lm, nil
		}
	}
	return lockMode{}, fmt.Errorf("%w %q", errUnknownMode, m)
}
