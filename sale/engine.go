// Package sale is the sale engine: it sells a purchase, a cart and a cancellation of stock kept by
// package inventory, each under the locks its lock mode takes, and answers each with the change's
// result or a typed error (*Error). It knows nothing of HTTP: package order is its shell.
//
// A change is admitted by the fleet first (Admit), which gives it a Ticket: the fleet's pass, the
// mode the pass admitted it in and its deadlines. Every lock mode is one row of a table (modes.go),
// run by one dispatch (dispatch.go run), and a COMMIT that went unanswered is settled in one place
// (settle.go) before the locks are released.
package sale

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/teaching"
	"github.com/zkstock/zkstock/inventory"
)

// LockRoot is where the per-SKU locks live: LockRoot + "/" + SKU.
const LockRoot = "/zkstock/locks/sku"

// LockPath is the ZooKeeper path of a SKU's lock.
func LockPath(sku string) string { return LockRoot + "/" + sku }

// releaseTimeout bounds a release that the request can no longer cancel. The answer waits for it;
// when ZooKeeper is unreachable, dlock keeps deleting the node in the background (and the node
// goes with the session anyway), so waiting longer would only delay the answer.
const releaseTimeout = 2 * time.Second

// Config is what the engine needs of the service's configuration.
type Config struct {
	ReplicaID   string
	LockTimeout time.Duration // the longest wait of a change for the fleet and for its locks
	WorkDelay   time.Duration // simulated work inside the critical section
	// QueueBudget is the longest foreseen lock wait a purchase is admitted to (admission.go);
	// 0: half of LockTimeout.
	QueueBudget time.Duration
	// ZKServers, ZKSessionTimeout and HerdOptions open mode zk-herd's own session.
	ZKServers        []string
	ZKSessionTimeout time.Duration
	HerdOptions      []teaching.Option
	Redis            RedisConfig
	Metrics          Metrics
	Lies             Lies
}

// RedisConfig is the Redis of the redis modes; an empty Addr: this replica cannot run them.
type RedisConfig struct {
	Addr, Username, Password string
	LockTTL                  time.Duration // the lock's expiry, extended every third of it; 0: 10 s
}

// Metrics are the engine's series, made and registered by the caller (a Prometheus histogram,
// counter and gauge vector's children fit); every field is required.
type Metrics struct {
	LockWait, LockHold Observer // seconds waited for a change's locks, and held
	// SoldOutBeforeQueue and SoldOutLeftQueue count purchases answered out_of_stock by a read of
	// the stock, without a turn of the lock (soldout.go).
	SoldOutBeforeQueue, SoldOutLeftQueue Counter
	Stock                                func(sku string) Gauge // the stock as this replica last saw it
	// FalseRefusals counts the sku_busy refusals found false: the queue the buyer would have
	// joined served it within the budget (admission.go falseRefusal).
	FalseRefusals Counter
	// CommitsUnanswered counts, per SKU, the changes whose COMMIT went unanswered and were
	// settled with the SKU's lock held (settle.go): each keeps the lock up to the commit bound.
	CommitsUnanswered func(sku string) Counter
}

// Observer takes one observation (prometheus.Observer).
type Observer interface{ Observe(float64) }

// Counter counts (prometheus.Counter).
type Counter interface{ Inc() }

// Gauge is set to a value (prometheus.Gauge).
type Gauge interface{ Set(float64) }

// Lies are mistakes planted on purpose for the checker's negative controls (order's planted.go);
// the zero value plants none.
type Lies struct {
	// SoldOutCache answers a purchase of a SKU suspected of being sold out out_of_stock from the
	// suspicion alone, without reading the stock.
	SoldOutCache bool
	// UnconfirmedNotSold answers a change whose COMMIT went unanswered as not made
	// (KindStorage), whatever the database says became of it.
	UnconfirmedNotSold bool
	// NoKeyHold holds no key (holdKey): a retry runs beside the attempt it retries, and is told
	// "nothing was sold" while that attempt may still commit.
	NoKeyHold bool
}

// Engine sells; it is safe for concurrent use. Close ends what it opened.
type Engine struct {
	cfg Config
	// src hands out the store each operation runs on (store): one server's, or a cluster's writer.
	src     inventory.Source
	locks   *dlock.Client
	log     *slog.Logger
	herd    herdSession // mode zk-herd's session, opened on first use
	redis   redisClient // the redis modes' client, opened on first use
	batches batches     // mode zk-batch's batchers
	known   knownSKUs   // SKUs seen to exist, with their stock gauges (known.go)
	// soldOut answers sold-out products without their lock queue (soldout.go); admission refuses
	// at once the purchases that would wait past the budget (admission.go).
	soldOut   *soldOut
	admission *admission
	gate      *lockGate // a SKU's lock queue here kept no longer than its stock (lockgate.go)
	// purchases answered without a turn of the lock: refused past the queue budget, and
	// out_of_stock from a read of the stock
	refused, soldOutFast atomic.Int64
	// checkedKeys are the client keys this replica holds and found free of orders (keyhold.go);
	// releases ends holdings in the background (keyrelease.go).
	checkedKeys sync.Map // key -> *atomic.Bool: kept past its answer (keepKey)
	releases    keyReleases
	keysHeld    atomic.Int64  // held for changes not yet answered
	stop        chan struct{} // closed by Close
	closeOnce   sync.Once
}

// New builds an engine on an open store (an *inventory.Store, or an *inventory.Cluster) and a
// connected lock client.
func New(cfg Config, src inventory.Source, locks *dlock.Client, log *slog.Logger) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg, src: src, locks: locks, log: log, stop: make(chan struct{})}
	e.batches.m = map[string]*batcher{}
	e.soldOut = newSoldOut(func(ctx context.Context, skus []string) (map[string]int64, error) {
		return e.store().Stocks(ctx, skus)
	}, e.stop, cfg.Lies.SoldOutCache)
	e.soldOut.keys = func(ctx context.Context, keys []string) (map[string]bool, error) {
		return e.store().KeysWithOrders(ctx, keys)
	}
	e.soldOut.keysInUse = func(ctx context.Context, keys []string) (map[string]bool, error) {
		return e.store().KeysInUse(ctx, keys)
	}
	e.soldOut.stocksThenKeys = func(ctx context.Context, skus, keys []string) (map[string]int64, map[string]bool, error) {
		return e.store().StocksThenKeysInUse(ctx, skus, keys)
	}
	budget := cfg.QueueBudget
	if budget == 0 {
		budget = cfg.LockTimeout / 2
	}
	e.admission = newAdmission(budget)
	if c := cfg.Metrics.FalseRefusals; c != nil {
		e.admission.falseRefusal = func(r refusalCheck, took time.Duration) {
			c.Inc()
			log.Debug("a refusal judged false", "sku", r.sku, "foreseen", r.foreseen, "contenders", r.ahead,
				"turn", r.turn, "took", took, "refused_at", r.at)
		}
	}
	e.gate = newLockGate(budget)
	if src != nil {
		e.gate.read = func(ctx context.Context, sku string) (int64, error) {
			stocks, err := e.store().Stocks(ctx, []string{sku})
			if err != nil {
				return 0, fmt.Errorf("sale: read the stock for the lock gate: %w", err)
			}
			stock, ok := stocks[sku]
			if !ok {
				return 0, fmt.Errorf("sale: read the stock for the lock gate: %w", inventory.ErrUnknownSKU)
			}
			e.admission.noteStock(sku, stock, time.Now())
			return stock, nil
		}
	}
	if locks != nil {
		e.admission.fleet = newFleetQueue(func(ctx context.Context, sku string) (dlock.QueueStat, error) {
			return locks.QueueStat(ctx, LockPath(sku))
		}).viewOf
	}
	e.releases.wake = make(chan struct{}, 1)
	if src != nil {
		go e.sweepKeys()
		go e.releaseWorker()
	}
	e.soldOut.seen = func(sku string, stock int64) {
		e.admission.noteStock(sku, stock, time.Now())
		e.gate.noteStock(sku, stock)
	}
	return e
}

// store is the store for one operation or one transaction: taken anew for each, so that on a
// cluster the next goes to the node that is the writer then.
func (e *Engine) store() *inventory.Store { return e.src.Store() }

// Close waits for the batches that are selling (mode zk-batch), at most LongestChange, releases
// the answered changes' keys, and ends what the engine opened itself: mode zk-herd's session, whose nodes go with it, and the redis
// modes' client. Call it once the fleet admits no more changes (fleet.Member.Close): a zk-batch or
// zk-herd change begun after it is refused (KindShuttingDown), a redis mode's fails to lock.
func (e *Engine) Close() {
	e.closeOnce.Do(func() { close(e.stop) })
	e.waitForBatches(e.LongestChange()) // a batch is a change: its lock wait, batchBound, its settle, its release
	if e.src != nil {
		e.releasePending() // the answered changes' holdings, once more: left, they would hold their keys until they expire
	}
	e.herd.close()
	e.redis.close()
}

// ZKStats adds up the ZooKeeper work of the replica's lock sessions (dlock's, and zk-herd's if opened).
func (e *Engine) ZKStats() dlock.Stats {
	st := e.locks.Stats()
	if herd := e.herd.opened(); herd != nil {
		st = st.Add(herd.Stats())
	}
	return st
}

// PoolStats is the database connection pool's, of the store in use now.
// Zero without a store.
func (e *Engine) PoolStats() sql.DBStats {
	if e.src == nil {
		return sql.DBStats{}
	}
	return e.store().PoolStats()
}

// Refused is how many purchases admission refused (sku_busy) since the engine started.
func (e *Engine) Refused() int64 { return e.refused.Load() }

// SoldOutFast is how many purchases a read of the stock answered out_of_stock without a turn of
// the lock since the engine started.
func (e *Engine) SoldOutFast() int64 { return e.soldOutFast.Load() }

// Restocked takes a restock made outside the engine (an admin's reset of sku to stock units): the
// SKU exists, holds that stock, and is no longer suspected of being sold out.
func (e *Engine) Restocked(sku string, stock int64) {
	e.rememberSKU(sku)
	e.soldOut.noteRestock(sku, stock)
}

// CanRun says why this replica cannot run a mode, or nil.
func (e *Engine) CanRun(m LockMode) error {
	lm, err := modeOf(m)
	if err != nil {
		return err
	}
	if lm.needsRedis && e.cfg.Redis.Addr == "" {
		return fmt.Errorf("mode %s needs Redis, and this replica has no REDIS_ADDR", m)
	}
	return nil
}

// Runnable lists the modes this replica can run, in the table's order.
func (e *Engine) Runnable() []string {
	var runnable []string
	for _, lm := range modeTable {
		if e.CanRun(lm.name) == nil {
			runnable = append(runnable, string(lm.name))
		}
	}
	return runnable
}

// herdSession is mode zk-herd's ZooKeeper session (herd.go).
type herdSession struct {
	mu sync.Mutex
	c  *teaching.Client
	// opening is closed when the opening under way ends; nil when none is.
	opening chan struct{}
}

func (h *herdSession) opened() *teaching.Client {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.c
}

func (h *herdSession) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c != nil {
		_ = h.c.Close()
		h.c = nil
	}
}
