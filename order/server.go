package order

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/fleet"
	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/sale"
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
const LockRoot = sale.LockRoot

var lockPath = sale.LockPath

const (
	maxBodyBytes = 4 << 10
	// MaxQty bounds one purchase; a larger quantity is a client error, not a sale.
	MaxQty = 1000
	// MaxStock bounds what the admin API may set.
	MaxStock = 1_000_000_000
)

// Server is one order-service replica: the HTTP shell around a sale engine. Each field is one
// component with one job.
type Server struct {
	cfg Config
	log *slog.Logger
	// src hands out the store of the products and orders the API reads and the admin resets
	// (db): one server's, or a cluster's writer.
	src   inventory.Source
	locks *dlock.Client // the replica's ZooKeeper session: readiness, the lock queues shown
	// fleet is this replica's place in its fleet, which admits every change (fleet.go).
	fleet   *fleet.Member
	sales   *sale.Engine // sells purchases, carts and cancellations
	metrics *metrics     // the Prometheus registry and the shell's series
	feeds   *feeds       // the live page's streams and what they show (feeds.go)
	// lookups and cancels throttle the requests that test a key, per client (ratelimit.go).
	lookups, cancels *clientLimiter
	lockPaths        lockPaths // the SKUs' lock paths found zkstock's (lockpaths.go)
}

// Close leaves the fleet once the changes in flight have ended (new ones are refused with
// shutting_down), then closes the sale engine: it waits for the batches that are selling (mode
// zk-batch) and ends what it opened itself (mode zk-herd's session, the redis modes' client).
func (s *Server) Close() {
	s.EndStreams()
	ctx, cancel := context.WithTimeout(context.Background(), s.sales.LongestChange())
	if err := s.fleet.Close(ctx); err != nil {
		s.log.Warn("left the fleet with changes still in flight", "err", err)
	}
	cancel()
	s.sales.Close()
}

// ZKStats adds up the ZooKeeper work of the replica's lock sessions (dlock's, and zk-herd's if opened).
func (s *Server) ZKStats() dlock.Stats { return s.sales.ZKStats() }

// db is the store for one request: taken anew for each, so that on a cluster it goes to the node
// that is the writer then.
func (s *Server) db() *inventory.Store { return s.src.Store() }

// New builds a replica on an open store (an *inventory.Store, or an *inventory.Cluster) and a
// connected lock client.
func New(cfg Config, src inventory.Source, locks *dlock.Client, log *slog.Logger) (*Server, error) {
	if _, err := ParseLockMode(string(cfg.LockMode)); err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.EventStreams == 0 {
		cfg.EventStreams = 64
	}
	if cfg.EventStreamsPerClient == 0 {
		cfg.EventStreamsPerClient = 16
	}
	cfg.EventStreamsPerClient = min(cfg.EventStreamsPerClient, cfg.EventStreams)
	if cfg.ConnsPerClient == 0 {
		cfg.ConnsPerClient = 1024
	}
	cfg.KeyLookupRate, cfg.KeyLookupBurst = cmp.Or(cfg.KeyLookupRate, 100), cmp.Or(cfg.KeyLookupBurst, 1000)
	cfg.CancelRate, cfg.CancelBurst = cmp.Or(cfg.CancelRate, 100), cmp.Or(cfg.CancelBurst, 1000)
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
	s := &Server{cfg: cfg, src: src, locks: locks, log: log.With("replica", cfg.ReplicaID), feeds: newFeeds(),
		lookups:   newClientLimiter("look-ups by key", cfg.KeyLookupRate, cfg.KeyLookupBurst),
		cancels:   newClientLimiter("cancellations", cfg.CancelRate, cfg.CancelBurst),
		lockPaths: lockPaths{ours: map[string]bool{}, logged: map[string]time.Time{}}}
	m, err := newMetrics(func() dlock.Stats { return s.sales.ZKStats() }, func() int64 { return s.sales.KeysHeld() }, func() sql.DBStats { return s.sales.PoolStats() })
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.sales = sale.New(sale.Config{
		ReplicaID: cfg.ReplicaID, LockTimeout: cfg.LockTimeout, WorkDelay: cfg.WorkDelay, QueueBudget: cfg.QueueBudget,
		ZKServers: cfg.ZKServers, ZKSessionTimeout: cfg.ZKSessionTimeout, HerdOptions: cfg.ZKAuth.teachingOptions(),
		Redis:   sale.RedisConfig{Addr: cfg.RedisAddr, Username: cfg.RedisUsername, Password: cfg.RedisPassword, LockTTL: cfg.RedisLockTTL},
		Metrics: m.sale,
		Lies:    sale.Lies{SoldOutCache: planted.soldOutCache, UnconfirmedNotSold: planted.unconfirmedNotSold, NoKeyHold: planted.noKeyHold},
	}, src, locks, s.log)
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
	r.GET("/v1/orders", s.throttle(s.lookups), s.orderByKey)
	r.GET("/v1/orders/:id", s.orderByID)
	r.POST("/v1/orders/:id/cancel", s.throttle(s.cancels), s.limitBody, s.cancelOrder)
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

// limitBody guards every route that reads a body: it refuses a Content-Encoding (refuseEncoding)
// and bounds the body to maxBodyBytes.
func (s *Server) limitBody(c *gin.Context) {
	if refuseEncoding(c) {
		return
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxBodyBytes)
	c.Next()
}

func (s *Server) ready(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	zkUp := s.locks.Connected()
	dbErr := s.db().Ping(ctx)
	s.src.Report(dbErr) // a cluster checks its writer at once
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
		msg += " " + s.notServing(fleetErr) + ";"
	}
	s.log.Debug("not ready", "zookeeper_up", zkUp, "database_err", dbErr, "fleet_err", fleetErr)
	abortWith(c, newError(http.StatusServiceUnavailable, "not_ready", msg[:len(msg)-1]))
}

// notServing says, in an operator's words, why this replica's place in the fleet admits nothing
// (fleet.Member.Status's err, never its text: it carries ZooKeeper's errors).
func (s *Server) notServing(err error) string {
	switch {
	case errors.Is(err, fleet.ErrCannotRun):
		mode := s.fleet.Mode().Name
		return fmt.Sprintf("the fleet runs mode %q, which this replica cannot run (it runs %s)", mode, strings.Join(s.sales.Runnable(), ", "))
	case errors.Is(err, fleet.ErrClosed):
		return "this replica has left its fleet: it is shutting down"
	case errors.Is(err, fleet.ErrNotMember):
		return "not a member of its fleet now: its place is being (re)established in ZooKeeper"
	}
	return "its place in the fleet is in doubt (this replica's log says why)"
}

func validSKU(sku string) *apiError {
	if !skuPattern.MatchString(sku) {
		return badRequest("sku must be 1 to 64 letters, digits, '_' or '-'")
	}
	return nil
}
