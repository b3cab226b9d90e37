package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/inventory"
)

// The HTTP server's timeouts, so that no client holds a connection, a goroutine or a shutdown
// for long by sending or reading slowly. Requests are small (a body of at most 4 KiB), so a
// request must arrive whole within readTimeout. A response must be written within writeTimeout:
// the longest a handler may take (sale.Engine.LongestChange), so that no answer is cut off, and writeMargin
// to write it. Live streams (GET /v1/events) lift both and set a deadline per event instead
// (streamWriteTimeout). Variables, so that tests can shorten them (writeTimeoutOverride: a
// test's WriteTimeout instead of the derived one).
var (
	readHeaderTimeout    = 5 * time.Second
	readTimeout          = 10 * time.Second
	writeMargin          = 20 * time.Second
	idleTimeout          = 60 * time.Second
	writeTimeoutOverride time.Duration
)

// startWindow bounds how long a replica tries each step of its start (open the database, migrate
// it, connect to ZooKeeper) before it gives up and exits, for its supervisor to start it again.
const startWindow = 30 * time.Second

// retryStart runs a step of the start until it succeeds or its window (startWindow) ends, each
// attempt within attemptBound: a replica started while the database or ZooKeeper is out of reach for a moment
// (restarted, cut off, as a supervisor restarting a fleet after an outage meets them) comes up
// when they are back, rather than exiting at the first refused connection. A configuration that
// can never work (inventory.ErrMisconfigured, or ZooKeeper refusing zkstock's identity a node) is
// not tried again.
func retryStart(parent context.Context, log *slog.Logger, step string, attemptBound time.Duration, try func(context.Context) error) error {
	ctx, cancelWindow := context.WithTimeout(parent, startWindow) // each step its own window
	defer cancelWindow()
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptBound)
		err := try(actx)
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, inventory.ErrMisconfigured) || errors.Is(err, zk.ErrNoAuth) {
			return fmt.Errorf("%s: %w", step, err) // no attempt can succeed: say so now
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s (%d attempts): %w", step, attempt, errors.Join(err, context.Cause(ctx)))
		}
		log.Warn("start: "+step+" failed; trying again", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s (%d attempts): %w", step, attempt, errors.Join(err, context.Cause(ctx)))
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// startFailed is Run's error for a start that did not complete: none when the replica was told to
// stop meanwhile (a SIGTERM while the database was still out of reach is a clean exit).
func startFailed(ctx context.Context, log *slog.Logger, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		log.Info("stopped while starting", "err", err)
		return nil
	}
	return fmt.Errorf("orderd: %w", err)
}

// startAttempt bounds one attempt of a start step: a connection black-holed (nothing answers, nothing
// is refused) is given up and dialled again, rather than waited on for the whole window.
const startAttempt = 5 * time.Second

func writeTimeout(longestChange time.Duration) time.Duration {
	if writeTimeoutOverride > 0 {
		return writeTimeoutOverride
	}
	return longestChange + writeMargin
}

// migrate creates or updates the tables as MySQLMigrateDSN's user (migrateDSN: on a cluster, at
// the writer's node), on a connection of its own closed at once, so that the serving pool never
// holds DDL rights; without it, as the service's own user (store), which works on tables already
// current and otherwise fails with the privilege it lacks named (inventory.ErrMissingPrivilege).
func migrate(ctx context.Context, migrateDSN string, store *inventory.Store) error {
	if migrateDSN == "" {
		return store.Migrate(ctx)
	}
	m, err := inventory.Open(ctx, migrateDSN, inventory.PoolOptions{MaxOpen: 1})
	if err != nil {
		return fmt.Errorf("MYSQL_MIGRATE_DSN: %w", err)
	}
	defer func() { _ = m.Close() }()
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("MYSQL_MIGRATE_DSN: %w", err)
	}
	return nil
}

// database is the stock database as Run opened it: one server, or a cluster.
type database struct {
	src   inventory.Source
	close func() error
	// migrateDSN is MYSQL_MIGRATE_DSN at the writer's node now; empty when not set.
	migrateDSN func() string
}

// openDatabase opens MYSQL_DSN's server, or, when MYSQL_NODES lists more than one node, the
// cluster of them (inventory.OpenCluster), with the first node that is ready as the writer, and
// every move of the writer logged. One node listed is that one server.
func openDatabase(ctx context.Context, cfg Config, log *slog.Logger) (database, error) {
	if len(cfg.MySQLNodes) == 0 {
		s, err := inventory.Open(ctx, cfg.MySQLDSN, inventory.PoolOptions{})
		if err != nil {
			return database{}, err
		}
		return database{src: s, close: s.Close, migrateDSN: func() string { return cfg.MySQLMigrateDSN }}, nil
	}
	dsns, err := NodeDSNs(cfg.MySQLDSN, cfg.MySQLNodes)
	if err != nil {
		return database{}, fmt.Errorf("%w: MYSQL_NODES with MYSQL_DSN: %w", inventory.ErrMisconfigured, err)
	}
	migrateDSNs := make([]string, len(dsns))
	if cfg.MySQLMigrateDSN != "" {
		if migrateDSNs, err = NodeDSNs(cfg.MySQLMigrateDSN, cfg.MySQLNodes); err != nil {
			return database{}, fmt.Errorf("%w: MYSQL_NODES with MYSQL_MIGRATE_DSN: %w", inventory.ErrMisconfigured, err)
		}
	}
	if len(dsns) == 1 {
		s, err := inventory.Open(ctx, dsns[0], inventory.PoolOptions{})
		if err != nil {
			return database{}, err
		}
		return database{src: s, close: s.Close, migrateDSN: func() string { return migrateDSNs[0] }}, nil
	}
	c, err := inventory.OpenCluster(ctx, dsns, inventory.PoolOptions{}, inventory.ClusterOptions{
		Log: log,
		OnMove: func(from, to int) {
			log.Warn("database: the writer moved to another node", "from", cfg.MySQLNodes[from], "to", cfg.MySQLNodes[to])
		},
	})
	if err != nil {
		return database{}, err
	}
	log.Info("database: a cluster", "nodes", cfg.MySQLNodes, "writer", cfg.MySQLNodes[c.Writer()])
	return database{src: c, close: c.Close, migrateDSN: func() string { return migrateDSNs[c.Writer()] }}, nil
}

// Run connects to ZooKeeper and the database, creates the tables, joins the fleet and serves until
// ctx ends. Then it stops accepting, lets every change in flight finish (for as long as the
// longest change may take: closing the lock client under a running change would drop its lock
// node at once and let another replica in before the change ends), leaves the fleet, and closes
// the lock client (its nodes go at once) and the database (a cluster's every node).
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := checkZKAuth(cfg.ZKAuth, cfg.ZKOpenACL); err != nil {
		return fmt.Errorf("orderd: %w", err)
	}
	var db database
	err := retryStart(ctx, log, "open the database", startAttempt, func(ctx context.Context) error {
		var err error
		db, err = openDatabase(ctx, cfg, log)
		return err
	})
	if err != nil {
		return startFailed(ctx, log, err)
	}
	defer func() {
		if err := db.close(); err != nil {
			log.Warn("close database", "err", err)
		}
	}()
	// Tried again too (the database may go between the two), but each attempt with the whole
	// window: a migration may copy a table, or wait for another replica's. On a cluster, once,
	// on the writer: Galera replicates the DDL.
	if err := retryStart(ctx, log, "migrate the database", startWindow, func(ctx context.Context) error {
		return migrate(ctx, db.migrateDSN(), db.src.Store())
	}); err != nil {
		return startFailed(ctx, log, err)
	}
	var locks *dlock.Client
	err = retryStart(ctx, log, "connect to ZooKeeper", startAttempt, func(ctx context.Context) error {
		var err error
		locks, err = dlock.Connect(ctx, cfg.ZKServers, append(cfg.ZKAuth.LockOptions(),
			dlock.WithSessionTimeout(cfg.ZKSessionTimeout), dlock.WithOwner(cfg.ReplicaID), dlock.WithLogger(log))...)
		if err != nil {
			return err
		}
		if err := SecureZK(ctx, locks, cfg.Fleet, log); err != nil {
			_ = locks.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return startFailed(ctx, log, err)
	}
	defer func() { _ = locks.Close() }()

	srv, err := New(cfg, db.src, locks, log)
	if err != nil {
		return err
	}
	defer srv.Close() // first of the defers: it waits for the changes in flight, then leaves the fleet
	joinCtx, cancelJoin := context.WithTimeout(ctx, 30*time.Second)
	if err := srv.Joined(joinCtx); err != nil {
		log.Warn("not yet a member of the fleet: serving, not ready until joined", "err", err)
	}
	cancelJoin()
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("orderd: listen: %w", err)
	}
	httpSrv := srv.HTTPServer()
	httpSrv.RegisterOnShutdown(srv.EndStreams) // Shutdown waits for handlers; live streams never end by themselves
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(srv.Listener(ln)) }()
	if cfg.PprofAddr != "" {
		stopPprof, err := servePprof(cfg.PprofAddr, log)
		if err != nil {
			_ = httpSrv.Close()
			return fmt.Errorf("orderd: %w", err)
		}
		defer stopPprof()
	}
	if srv.Mode() != cfg.LockMode {
		log.Warn("LOCK_MODE is not the fleet's mode: running the fleet's", "lock_mode", cfg.LockMode, "fleet_mode", srv.Mode(), "fleet", cfg.Fleet)
	}
	log.Info("orderd listening", "addr", ln.Addr().String(), "replica", cfg.ReplicaID, "fleet", cfg.Fleet, "mode", srv.Mode(),
		"zk", cfg.ZKServers, "lock_timeout", cfg.LockTimeout.String(), "work_delay", cfg.WorkDelay.String())

	select {
	case err := <-serveErr:
		return fmt.Errorf("orderd: serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight purchases")
	shCtx, cancel := context.WithTimeout(context.Background(), srv.sales.LongestChange())
	defer cancel()
	if err := httpSrv.Shutdown(shCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("orderd: shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// servePprof serves Go's pprof handlers (net/http/pprof) on a listener of their own, never on the
// API's: PPROF_ADDR, off unless set (CheckPprofAddr says which addresses it takes).
func servePprof(addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	go func() { _ = srv.Serve(ln) }()
	log.Info("pprof listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
