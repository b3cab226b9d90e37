package sale

import (
	"context"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/teaching"
	"github.com/zkstock/zkstock/inventory"
)

// The lock functions of the table's rows (modes.go): each takes the locks of a sorted set of
// distinct SKUs, all or nothing, as one holding.

// zkLocks is dlock's fair lock: one Mutex, or LockAll for several in one canonical order.
func (e *Engine) zkLocks(ctx context.Context, skus []string) (holding, error) {
	if len(skus) == 1 {
		l, err := dlock.NewMutex(e.locks, LockPath(skus[0])).Lock(ctx)
		if err != nil {
			return nil, err
		}
		return oneLock{skus[0], l}, nil
	}
	mutexes := make([]*dlock.Mutex, len(skus))
	for i, sku := range skus {
		mutexes[i] = dlock.NewMutex(e.locks, LockPath(sku))
	}
	l, err := dlock.LockAll(ctx, mutexes...)
	if err != nil {
		return nil, err
	}
	return zkLeases{l, skus}, nil
}

// herdLocks is the teaching herd recipe, on a session of its own (herdClient).
func (e *Engine) herdLocks(ctx context.Context, skus []string) (holding, error) {
	c, err := e.herdClient(ctx)
	if err != nil {
		return nil, err
	}
	return lockInOrder(ctx, skus, func(ctx context.Context, sku string) (heldLock, error) {
		return teaching.NewHerdLock(c, LockPath(sku)).Lock(ctx)
	})
}

// tableLockTTL bounds how long a crashed holder of the table locks of skus blocks them, and must
// outlast the longest hold of a live holder, which nothing else ends: the wait for the locks of a
// cart's later SKUs (LOCK_TIMEOUT), held while the first ones are; the work; the transaction's
// round trips, its COMMIT's wait included, each within the store's read timeout; when the COMMIT
// goes unanswered, settle's (settleBound); the release. It follows the configuration and the
// database's timeouts, not a constant.
func (e *Engine) tableLockTTL(skus int) time.Duration {
	var others time.Duration
	if skus > 1 {
		others = e.cfg.LockTimeout
	}
	return others + e.cfg.WorkDelay + changeRoundTrips(skus)*e.store().ReadTimeout() + e.settleBound() + releaseTimeout
}

// changeRoundTrips is the most round trips a change of skus makes in its transaction: BEGIN, the
// session's read (three the first time after the server started: the run's mark), the key's
// look-up, a read and a write per SKU, the orders' insert and the COMMIT (a one-line sale sends
// fewer).
func changeRoundTrips(skus int) time.Duration { return time.Duration(7 + 2*skus) }

// tableLocks is the database lock of the classic comparison, polled every 2 ms.
func (e *Engine) tableLocks(ctx context.Context, skus []string) (holding, error) {
	return lockInOrder(ctx, skus, func(ctx context.Context, sku string) (heldLock, error) {
		h, err := e.store().AcquireTableLock(ctx, "sku:"+sku, e.tableLockTTL(len(skus)), 2*time.Millisecond)
		if err != nil {
			return nil, err
		}
		return newTableLease(h), nil
	})
}

// redisUnfencedLocks and redisFencedLocks are go-redsync's lock, without and with a token.
func (e *Engine) redisUnfencedLocks(ctx context.Context, skus []string) (holding, error) {
	return e.redisLocksOf(ctx, skus, false)
}

func (e *Engine) redisFencedLocks(ctx context.Context, skus []string) (holding, error) {
	return e.redisLocksOf(ctx, skus, true)
}

func (e *Engine) redisLocksOf(ctx context.Context, skus []string, fenced bool) (holding, error) {
	return lockInOrder(ctx, skus, func(ctx context.Context, sku string) (heldLock, error) {
		r := e.redisLocks()
		if r == nil {
			return nil, errShuttingDown
		}
		l, err := r.lock(ctx, sku, fenced)
		if err != nil {
			return nil, err // not a nil *redisLease in the interface
		}
		return l, nil
	})
}

// raiseRedisTokens lifts each SKU's Redis token counter to the Redis mark of the database's fence,
// after the fence refused a Redis token: Redis lost its counter (a restart without persistence),
// and every later holder would be refused too. It says whether it raised them all.
func (e *Engine) raiseRedisTokens(ctx context.Context, skus []string, log Log) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	for _, sku := range skus {
		prod, err := e.store().Product(ctx, sku)
		if err != nil {
			log.Warn("read the fence to raise the Redis token counter", "sku", sku, "err", err)
			return false
		}
		mark := prod.Mark(inventory.IssuerRedis)
		r := e.redisLocks()
		if r == nil {
			return false
		}
		raised, err := r.raiseTokenTo(ctx, sku, mark)
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
