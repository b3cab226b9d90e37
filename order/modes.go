package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/teaching"
	"github.com/zkstock/zkstock/inventory"
)

// lockMode is one row of the table of lock modes: all that a mode means, for a purchase, a cart
// and a cancellation alike.
type lockMode struct {
	name LockMode
	// lock takes the locks of a sorted set of distinct SKUs (one, for a purchase), all or
	// nothing; nil for the modes that take none and leave the protection to the database.
	lock func(s *Server, ctx context.Context, skus []string) (holding, error)
	// needsRedis: the mode's lock is kept in Redis; a replica without REDIS_ADDR cannot run it.
	needsRedis bool
	// protect is how the inventory change protects itself under the lock.
	protect inventory.Mode
	// issuer issued the lock's tokens, which the fence checks (protect == Fenced).
	issuer inventory.Issuer
	// batched: single purchases queue for the SKU's batcher, which sells them under one lease.
	batched bool
	// fleetQueue: each purchase waits in the SKU's lock queue in ZooKeeper (lockPath), where
	// admission reads the whole fleet's queue (fleetqueue.go).
	fleetQueue bool
	// repairStale runs when the fence refused the lock's token: it brings the issuer up to the
	// fence and says whether to try once more with a new lock.
	repairStale func(s *Server, ctx context.Context, skus []string, log requestLog) bool
}

// modeTable is every lock mode, in the order the docs show them. Later modes add to it.
var modeTable = []lockMode{
	{name: ModeZK, lock: (*Server).zkLocks, protect: inventory.Fenced, issuer: inventory.IssuerZooKeeper, fleetQueue: true},
	{name: ModeZKUnfenced, lock: (*Server).zkLocks, protect: inventory.Unfenced, fleetQueue: true},
	{name: ModeNone, protect: inventory.Unsafe},
	{name: ModeZKHerd, lock: (*Server).herdLocks, protect: inventory.Fenced, issuer: inventory.IssuerZooKeeper, fleetQueue: true},
	{name: ModeDBForUpdate, protect: inventory.ForUpdate},
	{name: ModeDBCAS, protect: inventory.CAS},
	{name: ModeDBLockTable, lock: (*Server).tableLocks, protect: inventory.Unfenced},
	{name: ModeZKBatch, lock: (*Server).zkLocks, protect: inventory.Fenced, issuer: inventory.IssuerZooKeeper,
		batched: true},
	{name: ModeRedis, lock: (*Server).redisUnfencedLocks, needsRedis: true, protect: inventory.Unfenced},
	{name: ModeRedisFenced, lock: (*Server).redisFencedLocks, needsRedis: true, protect: inventory.Fenced, issuer: inventory.IssuerRedis,
		repairStale: (*Server).raiseRedisTokens},
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

// zkLocks is dlock's fair lock: one Mutex, or LockAll for several in one canonical order.
func (s *Server) zkLocks(ctx context.Context, skus []string) (holding, error) {
	if len(skus) == 1 {
		l, err := dlock.NewMutex(s.locks, lockPath(skus[0])).Lock(ctx)
		if err != nil {
			return nil, err
		}
		return oneLock{skus[0], l}, nil
	}
	mutexes := make([]*dlock.Mutex, len(skus))
	for i, sku := range skus {
		mutexes[i] = dlock.NewMutex(s.locks, lockPath(sku))
	}
	l, err := dlock.LockAll(ctx, mutexes...)
	if err != nil {
		return nil, err
	}
	return zkLeases{l, skus}, nil
}

// herdLocks is the teaching herd recipe, on a session of its own (herdClient).
func (s *Server) herdLocks(ctx context.Context, skus []string) (holding, error) {
	c, err := s.herdClient(ctx)
	if err != nil {
		return nil, err
	}
	return lockInOrder(ctx, skus, func(ctx context.Context, sku string) (heldLock, error) {
		return teaching.NewHerdLock(c, lockPath(sku)).Lock(ctx)
	})
}

// tableLockTTL bounds how long a crashed holder of the table locks of skus blocks them, and must
// outlast the longest hold of a live holder, which nothing else ends: the wait for the locks of a
// cart's later SKUs (LOCK_TIMEOUT), held while the first ones are; the work; the transaction's
// round trips, its COMMIT's wait included, each within the store's read timeout; when the COMMIT
// goes unanswered, settle's (settleBound); the release. It follows the configuration and the
// database's timeouts, not a constant.
func (s *Server) tableLockTTL(skus int) time.Duration {
	var others time.Duration
	if skus > 1 {
		others = s.cfg.LockTimeout
	}
	return others + s.cfg.WorkDelay + changeRoundTrips(skus)*s.store.ReadTimeout() + s.settleBound() + releaseTimeout
}

// changeRoundTrips is the most round trips a change of skus makes in its transaction: BEGIN, the
// session's read (three the first time after the server started: the run's mark), the key's
// look-up, a read and a write per SKU, the orders' insert and the COMMIT (a one-line sale sends
// fewer).
func changeRoundTrips(skus int) time.Duration { return time.Duration(7 + 2*skus) }

// tableLocks is the database lock of the classic comparison, polled every 2 ms.
func (s *Server) tableLocks(ctx context.Context, skus []string) (holding, error) {
	return lockInOrder(ctx, skus, func(ctx context.Context, sku string) (heldLock, error) {
		h, err := s.store.AcquireTableLock(ctx, "sku:"+sku, s.tableLockTTL(len(skus)), 2*time.Millisecond)
		if err != nil {
			return nil, err
		}
		return newTableLease(h), nil
	})
}

// redisUnfencedLocks and redisFencedLocks are go-redsync's lock, without and with a token.
func (s *Server) redisUnfencedLocks(ctx context.Context, skus []string) (holding, error) {
	return s.redisLocksOf(ctx, skus, false)
}

func (s *Server) redisFencedLocks(ctx context.Context, skus []string) (holding, error) {
	return s.redisLocksOf(ctx, skus, true)
}

func (s *Server) redisLocksOf(ctx context.Context, skus []string, fenced bool) (holding, error) {
	return lockInOrder(ctx, skus, func(ctx context.Context, sku string) (heldLock, error) {
		l, err := s.redisLocks().lock(ctx, sku, fenced)
		if err != nil {
			return nil, err // not a nil *redisLease in the interface
		}
		return l, nil
	})
}

// raiseRedisTokens lifts each SKU's Redis token counter to the Redis mark of the database's fence,
// after the fence refused a Redis token: Redis lost its counter (a restart without persistence),
// and every later holder would be refused too. It says whether it raised them all.
func (s *Server) raiseRedisTokens(ctx context.Context, skus []string, log requestLog) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	for _, sku := range skus {
		prod, err := s.store.Product(ctx, sku)
		if err != nil {
			log.Warn("read the fence to raise the Redis token counter", "sku", sku, "err", err)
			return false
		}
		mark := prod.Mark(inventory.IssuerRedis)
		raised, err := s.redisLocks().raiseTokenTo(ctx, sku, mark)
		switch {
		case err != nil:
			log.Warn("raise the Redis token counter", "sku", sku, "err", err)
			return false
		case raised:
			log.Warn("Redis token counter was behind the database fence: raised", "sku", sku, "mark", mark)
		}
	}
	return true
}
