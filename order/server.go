package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/fleet"
	"github.com/zkstock/zkstock/dlock/teaching"
	"github.com/zkstock/zkstock/inventory"
)

// nameChars and maxNameLen are what a SKU (and a fleet or a replica id) may be made of; they keep
// lock paths and URLs safe. skuPattern checks a name against them, ReplicaIDFromHost makes one.
const (
	nameChars  = `A-Za-z0-9_-`
	maxNameLen = 64
)

var (
	skuPattern   = regexp.MustCompile(fmt.Sprintf(`^[%s]{1,%d}$`, nameChars, maxNameLen))
	notNameChars = regexp.MustCompile(`[^` + nameChars + `]`)
)

// LockRoot is where the per-SKU locks live: LockRoot + "/" + SKU.
const LockRoot = "/zkstock/locks/sku"

const (
	maxBodyBytes = 4 << 10
	// MaxQty bounds one purchase; a larger quantity is a client error, not a sale.
	MaxQty = 1000
	// MaxStock bounds what the admin API may set.
	MaxStock = 1_000_000_000
	// releaseTimeout bounds a release that the request can no longer cancel. The answer waits for
	// it; when ZooKeeper is unreachable, dlock keeps deleting the node in the background (and the
	// node goes with the session anyway), so waiting longer would only delay the answer.
	releaseTimeout = 2 * time.Second
)

// Server is one order-service replica.
type Server struct {
	cfg   Config
	store *inventory.Store
	locks *dlock.Client
	log   *slog.Logger
	fleet *fleet.Member // this replica's place in its fleet, which admits every change (fleet.go)
	// members: the fleet's members as the live page shows them (events.go)
	members membersView

	metrics *metrics
	reg     *prometheus.Registry
	known   knownSKUs // SKUs seen to exist, with their stock gauges (known.go)

	batchersMu sync.Mutex
	batchers   map[string]*batcher // mode zk-batch, per SKU with purchases queued or selling
	batchRuns  sync.WaitGroup      // the batchers' loops, which Close waits for
	// batchesClosed: Close is waiting for the loops, and no new one starts (under batchersMu).
	batchesClosed bool
	batchPanic    func() // tests only: runs inside every batch's sale

	herdMu sync.Mutex
	herd   *teaching.Client // mode zk-herd's session, opened on first use
	// herdOpening is closed when the opening of herd under way ends; nil when none is.
	herdOpening chan struct{}

	redisOnce sync.Once
	redis     *redisLocks // the redis modes' client, opened on first use

	soldOut   *soldOut     // sold-out products answered without their lock queue (soldout.go)
	gate      *lockGate    // a SKU's lock queue here kept no longer than its stock (lockgate.go)
	admission *admission   // purchases refused at once that would wait past the budget (admission.go)
	feeds     *feeds       // the live page's streams
	sales     atomic.Int64 // purchases this replica made, for the live page's rate
	// purchases answered without a turn of the lock, for the live page: refused past the queue
	// budget, and out_of_stock from a read of the stock
	refused, soldOutFast atomic.Int64
	stop                 chan struct{} // closed by Close
	closeOnce            sync.Once
}

// herdClient is mode zk-herd's ZooKeeper session. The herd recipe is a teaching one, kept out of
// dlock with a session of its own, opened the first time a replica sells in that mode. One caller
// opens it; the others wait for that, each only until its own ctx ends: while ZooKeeper is
// unreachable, a queue behind a lock held through the opening (and go-zookeeper's second to close
// a session that never connected) answered the Nth purchase after about N seconds.
func (s *Server) herdClient(ctx context.Context) (*teaching.Client, error) {
	for {
		s.herdMu.Lock()
		if s.herd != nil {
			c := s.herd
			s.herdMu.Unlock()
			return c, nil
		}
		opening := s.herdOpening
		if opening == nil {
			if err := ctx.Err(); err != nil { // woken by a failed opening as its own wait ended
				s.herdMu.Unlock()
				return nil, fmt.Errorf("zk-herd session: %w", err)
			}
			done := make(chan struct{})
			s.herdOpening = done
			s.herdMu.Unlock()
			return s.openHerd(ctx, done)
		}
		s.herdMu.Unlock()
		select {
		case <-opening: // opened, or failed for its opener's reasons: look again
		case <-ctx.Done():
			return nil, fmt.Errorf("zk-herd session: %w", ctx.Err())
		}
	}
}

// openHerd opens the herd session for herdClient, and closes done when it is over.
func (s *Server) openHerd(ctx context.Context, done chan struct{}) (*teaching.Client, error) {
	c, err := teaching.Connect(ctx, s.cfg.ZKServers, s.cfg.ZKSessionTimeout, s.cfg.ReplicaID, s.cfg.ZKAuth.teachingOptions()...)
	s.herdMu.Lock()
	defer s.herdMu.Unlock()
	s.herdOpening = nil
	close(done)
	if err != nil {
		return nil, fmt.Errorf("zk-herd session: %w", err)
	}
	select {
	case <-s.stop: // Close has run, and would not see this session to close it
		_ = c.Close()
		return nil, fmt.Errorf("zk-herd session: %w", errShuttingDown)
	default:
	}
	s.herd = c
	return c, nil
}

// Close leaves the fleet once the changes in flight have ended (new ones are refused with
// shutting_down), waits for the batches that are selling (mode zk-batch) and ends what the server
// opened itself: mode zk-herd's session, whose nodes go with it, and the redis modes' client.
func (s *Server) Close() {
	s.EndStreams()
	s.closeOnce.Do(func() { close(s.stop) })
	ctx, cancel := context.WithTimeout(context.Background(), s.longestChange())
	if err := s.fleet.Close(ctx); err != nil {
		s.log.Warn("left the fleet with changes still in flight", "err", err)
	}
	cancel()
	s.waitForBatches(s.longestChange()) // a batch is a change: its lock wait, batchBound, its settle, its release
	s.herdMu.Lock()
	if s.herd != nil {
		_ = s.herd.Close()
		s.herd = nil
	}
	s.herdMu.Unlock()
	s.redisOnce.Do(func() {}) // no client is opened after Close
	if s.redis != nil {
		_ = s.redis.client.Close()
	}
}

// ZKStats adds up the ZooKeeper work of the replica's lock sessions (dlock's, and zk-herd's if opened).
func (s *Server) ZKStats() dlock.Stats {
	st := s.locks.Stats()
	s.herdMu.Lock()
	herd := s.herd
	s.herdMu.Unlock()
	if herd != nil {
		st = st.Add(herd.Stats())
	}
	return st
}

// New builds a replica on an open store and a connected lock client.
func New(cfg Config, store *inventory.Store, locks *dlock.Client, log *slog.Logger) (*Server, error) {
	if _, err := ParseLockMode(string(cfg.LockMode)); err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.EventStreams == 0 {
		cfg.EventStreams = 64
	}
	if cfg.Fleet == "" {
		cfg.Fleet = "default"
	}
	// Both name ZooKeeper nodes (the fleet's path, the member node): one path element each.
	if err := checkZKAuth(cfg.ZKAuth, cfg.ZKOpenACL); err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	if !skuPattern.MatchString(cfg.Fleet) || !skuPattern.MatchString(cfg.ReplicaID) {
		return nil, fmt.Errorf("order: the fleet %q and the replica id %q must match %s", cfg.Fleet, cfg.ReplicaID, skuPattern)
	}
	s := &Server{cfg: cfg, store: store, locks: locks, log: log.With("replica", cfg.ReplicaID), batchers: map[string]*batcher{},
		feeds: newFeeds(), stop: make(chan struct{})}
	s.reg = prometheus.NewRegistry()
	m, err := newMetrics(s.reg, s.ZKStats)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.soldOut = newSoldOut(store.Stocks, s.stop)
	budget := cfg.QueueBudget
	if budget == 0 {
		budget = cfg.LockTimeout / 2
	}
	s.admission = newAdmission(budget)
	s.gate = newLockGate()
	if s.locks != nil {
		queue := newFleetQueue(func(ctx context.Context, sku string) (dlock.QueueStat, error) {
			return s.locks.QueueStat(ctx, lockPath(sku))
		})
		s.admission.fleet = func(sku string, mode LockMode) (int, time.Duration, bool) {
			if lm, err := modeOf(mode); err != nil || !lm.fleetQueue {
				return 0, 0, false
			}
			return queue.view(sku)
		}
	}
	s.soldOut.seen = func(sku string, stock int64) {
		s.admission.noteStock(sku, stock, time.Now())
		s.gate.noteStock(sku, stock)
	}
	if s.fleet, err = s.joinFleet(); err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	return s, nil
}

// Joined waits until the replica has joined its fleet and read the fleet's mode, or ctx ends.
func (s *Server) Joined(ctx context.Context) error { return s.fleet.Joined(ctx) }

// Mode is the fleet's lock mode as this replica last read it (LOCK_MODE before it has joined).
func (s *Server) Mode() LockMode {
	if m := s.fleet.Mode(); m.Name != "" {
		return LockMode(m.Name)
	}
	return s.cfg.LockMode
}

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// An API answers what it is asked: no 307 to a path with one slash fewer, which would also
	// answer an admin path before its token is checked.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	r.Use(s.recoverJSON)
	r.NoRoute(func(c *gin.Context) { abortWith(c, newError(http.StatusNotFound, "not_found", "no such route")) })
	r.NoMethod(func(c *gin.Context) {
		abortWith(c, newError(http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route"))
	})

	r.POST("/v1/orders", s.limitBody, s.purchase)
	r.GET("/v1/orders", s.orderByKey)
	r.GET("/v1/orders/:id", s.orderByID)
	r.POST("/v1/orders/:id/cancel", s.limitBody, s.cancelOrder)
	r.GET("/v1/products", s.productsList)
	r.GET("/v1/events", s.events)
	r.GET("/", s.page)
	r.GET("/assets/:file", s.asset)
	r.GET("/v1/products/:sku/orders", s.productOrders)
	r.GET("/v1/products/:sku", s.product)
	r.GET("/v1/products/:sku/audit", s.audit)
	r.GET("/v1/products/:sku/lock", s.lockQueue)

	admin := r.Group("/admin", s.requireAdmin)
	admin.PUT("/products/:sku", s.limitBody, s.resetProduct)
	admin.GET("/lock-mode", s.getLockMode)
	admin.PUT("/lock-mode", s.limitBody, s.setLockMode)
	admin.POST("/fences/:issuer/lower", s.limitBody, s.lowerFence)

	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok", "replica": s.cfg.ReplicaID}) })
	r.GET("/readyz", s.ready)
	r.GET("/metrics", gin.WrapH(s.metricsHandler()))
	return r
}

// recoverJSON turns a panic in a handler into a 500 JSON answer; deferred releases in the
// handler have run by then, so no lock stays held.
func (s *Server) recoverJSON(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic in handler", "path", c.FullPath(), "panic", fmt.Sprint(v))
			abortWith(c, newError(http.StatusInternalServerError, "internal", "internal error"))
		}
	}()
	c.Next()
}

func (s *Server) limitBody(c *gin.Context) {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxBodyBytes)
	c.Next()
}

func (s *Server) ready(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	zkUp := s.locks.Connected()
	dbErr := s.store.Ping(ctx)
	fleetErr := s.fleet.Status()
	if errors.Is(fleetErr, fleet.ErrSwitching) {
		fleetErr = nil // a member still, and serving again within the switch's bound
	}
	if zkUp && dbErr == nil && fleetErr == nil {
		c.JSON(http.StatusOK, gin.H{"status": "ready", "zookeeper": "up", "database": "up", "mode": s.Mode()})
		return
	}
	msg := "not ready:"
	if !zkUp {
		msg += " no ZooKeeper session;"
	}
	if dbErr != nil {
		msg += " database unreachable;"
	}
	if fleetErr != nil {
		msg += " fleet: " + fleetErr.Error() + ";"
	}
	abortWith(c, newError(http.StatusServiceUnavailable, "not_ready", msg[:len(msg)-1]))
}

func lockPath(sku string) string { return LockRoot + "/" + sku }

func validSKU(sku string) *apiError {
	if !skuPattern.MatchString(sku) {
		return badRequest("sku must be 1 to 64 letters, digits, '_' or '-'")
	}
	return nil
}
