package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Store is the products and orders tables behind one connection pool.
type Store struct {
	db    *gorm.DB
	sqlDB *sql.DB // db's pool, for the hot path's fixed statements
	// waitTimeout is the longest wait_timeout, in seconds, that a session of the pool reported
	// (noteSession): CommitBound's, as the server applies it.
	waitTimeout atomic.Int64
	// now is this process's clock, for the times it stamps on rows; tests skew it.
	now func() time.Time
	// readTimeout bounds the wait for one statement's answer on every connection.
	readTimeout time.Duration
	// galera: the server is a Galera node (wsrep_on); its sessions read causally (settings.go).
	galera bool
	// insertReturns: the server has INSERT ... RETURNING, which recordOrders uses for several rows.
	insertReturns bool
	// addr is the server's address, as the DSN gives it (ServerConn.Addr).
	addr string
}

// PoolOptions size the connection pool.
type PoolOptions struct {
	MaxOpen int // default 50
	MaxIdle int // default 50
}

// Timeouts on every connection, unless the DSN sets its own readTimeout and writeTimeout. A
// connection whose peer vanished without a reset (a dead host, a black-holed route) otherwise
// hangs a reader until TCP gives up, minutes later, and a COMMIT, which the driver sends without
// watching any context, hangs with it, inside the SKU's lock. The timeout bounds one read or
// write of one statement's answer, so it must exceed the longest statement the service sends: a
// row-lock wait behind another transaction (the fence claim, SELECT ... FOR UPDATE), which the
// lock modes keep to one critical section's length, and the migration lock's 2 s waits.
const (
	defaultReadTimeout  = 10 * time.Second
	defaultWriteTimeout = 10 * time.Second
)

// Open connects to the database at dsn (go-sql-driver syntax). It turns on clientFoundRows, so
// that an UPDATE reports the rows it matched even when a value did not change (the fence claim
// relies on it), parseTime, interpolateParams (one round trip per statement) and multiStatements
// (several statements in one round trip, for sellPipelined). It sets readTimeout and
// writeTimeout to 10 s unless the DSN sets them, and every session's wait_timeout to commitIdleTimeout (see CommitBound): the server
// ends a connection it has not heard from for that long, which rolls back its transaction, so a
// transaction stranded behind a vanished client does not hold its row locks for hours. A pause
// inside a transaction (WORK_DELAY) must stay shorter than that.
//
// Open refuses a session character set in which the driver's escaping of arguments is unsafe
// (checkCharset). On a Galera node it sets wsrep_sync_wait=1 on every session unless the DSN sets
// its own, and refuses the settings under which the service's guarantees do not hold with a
// *SettingError, and a node that is not a Synced member of the primary component with
// ErrNodeNotReady (settings.go). Any auto_increment_increment is accepted: nothing assumes that
// orders' ids are consecutive (recordOrders).
func Open(ctx context.Context, dsn string, pool PoolOptions) (*Store, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: parse MYSQL_DSN: %w", ErrMisconfigured, err)
	}
	cfg.ClientFoundRows = true
	cfg.ParseTime = true
	// A statement with arguments is otherwise prepared, executed and closed on the server: three
	// round trips where one does. Profiling a replica under load found the replica's time in
	// those packets' system calls. The driver escapes the arguments itself, and falls back to
	// preparing for the character sets where that would be unsafe.
	cfg.InterpolateParams = true
	// A sale's statements that need no answer in between travel as one text (pipelined.go). The
	// risk multiStatements brings is a value spliced into a statement's text, which could then
	// end it and start another: every statement here is a constant with placeholders (the
	// spliced parts, a fence's column and a SELECT's first column, are chosen from fixed lists),
	// and the driver escapes each argument for the session, honouring NO_BACKSLASH_ESCAPES.
	// That escaping is unsafe in the character sets where a multibyte character may end in a
	// backslash's byte (big5, gbk, sjis, ...): checkCharset refuses any but a few safe ones.
	cfg.MultiStatements = true
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = defaultReadTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = defaultWriteTimeout
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	// The service's, whatever the DSN says: CommitBound counts on it.
	cfg.Params["wait_timeout"] = strconv.Itoa(int(commitIdleTimeout / time.Second))
	galera, err := galeraOn(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, set := cfg.Params["wsrep_sync_wait"]; galera && !set {
		cfg.Params["wsrep_sync_wait"] = strconv.Itoa(syncWaitReads)
	}
	db, err := gorm.Open(gormmysql.Open(cfg.FormatDSN()), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		TranslateError:         true,
	})
	if err != nil {
		return nil, nodeErr(fmt.Errorf("inventory: open %s: %w", cfg.Addr, err), galera)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("inventory: pool: %w", err)
	}
	if pool.MaxOpen == 0 {
		pool.MaxOpen = 50
	}
	if pool.MaxIdle == 0 {
		pool.MaxIdle = pool.MaxOpen
	}
	sqlDB.SetMaxOpenConns(pool.MaxOpen)
	sqlDB.SetMaxIdleConns(pool.MaxIdle)
	sqlDB.SetConnMaxLifetime(30 * time.Minute)
	// Retired before the server's wait_timeout ends them, so that a pooled connection is not
	// found dead at its next use.
	sqlDB.SetConnMaxIdleTime(commitIdleTimeout / 2)
	s := &Store{db: db, sqlDB: sqlDB, now: time.Now, readTimeout: cfg.ReadTimeout, galera: galera, addr: cfg.Addr}
	checks := []func(context.Context) error{s.Ping, s.checkWaitTimeout, s.checkVersion, s.checkCharset}
	if galera {
		checks = append(checks, s.checkGalera)
	}
	for _, check := range checks {
		if err := check(ctx); err != nil {
			_ = s.Close()
			return nil, nodeErr(err, galera)
		}
	}
	return s, nil
}

// checkVersion reads the server's version: whether it has INSERT ... RETURNING.
func (s *Store) checkVersion(ctx context.Context) error {
	var version string
	if err := s.sqlDB.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return fmt.Errorf("inventory: read the server's version: %w", err)
	}
	s.insertReturns = insertReturnsOn(version)
	return nil
}

// Galera says whether the store's server is a Galera node (wsrep_on).
func (s *Store) Galera() bool { return s.galera }

// checkWaitTimeout reads wait_timeout back as the server applies it to the pool's sessions: the
// DSN asks for commitIdleTimeout, but a server or a proxy in between may keep its own, and
// CommitBound must count on the one in force. Every transaction reads its own session's again.
func (s *Store) checkWaitTimeout(ctx context.Context) error {
	var waitTimeout int64
	if err := s.sqlDB.QueryRowContext(ctx, "SELECT @@SESSION.wait_timeout").Scan(&waitTimeout); err != nil {
		return fmt.Errorf("inventory: read wait_timeout: %w", err)
	}
	s.noteSession(waitTimeout)
	return nil
}

// ErrUnsafeCharset: the connection's character set is not one whose escaping is safe; see Open.
var ErrUnsafeCharset = fmt.Errorf("%w: the connection's character set must be utf8mb4, utf8mb3, latin1, ascii or binary", ErrMisconfigured)

// checkCharset reads the character set the pool's sessions send statements in (the DSN's
// charset, or the server's default) and refuses one in which the driver's escaping of arguments
// is unsafe.
func (s *Store) checkCharset(ctx context.Context) error {
	var cs string
	if err := s.sqlDB.QueryRowContext(ctx, "SELECT @@SESSION.character_set_client").Scan(&cs); err != nil {
		return fmt.Errorf("inventory: read character_set_client: %w", err)
	}
	switch strings.ToLower(cs) {
	case "utf8mb4", "utf8mb3", "utf8", "latin1", "ascii", "binary":
		return nil
	}
	return fmt.Errorf("%w, not %s", ErrUnsafeCharset, cs)
}

// Migrate creates or updates the tables. Replicas starting together on a fresh database would
// race to create the same tables, so it runs under a database-wide named lock, on one connection.
func (s *Store) Migrate(ctx context.Context) error {
	err := s.db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		// Each statement in a fresh session: chained on conn they would share one statement.
		session := func() *gorm.DB { return conn.Session(&gorm.Session{NewDB: true}) }
		// Waits of 2 s, well inside the connection's read timeout, for up to 30 s in all.
		for deadline := time.Now().Add(30 * time.Second); ; {
			var got sql.NullInt64
			if err := session().Raw("SELECT GET_LOCK('zkstock_migrate', 2)").Scan(&got).Error; err != nil {
				return err
			}
			if got.Valid && got.Int64 == 1 {
				break
			}
			if time.Now().After(deadline) {
				return errors.New("another replica held the migration lock for 30 s")
			}
		}
		defer session().Exec("SELECT RELEASE_LOCK('zkstock_migrate')")
		if err := session().AutoMigrate(&Product{}, &Order{}, &TableLock{}, &KeyAttempt{}); err != nil {
			return err
		}
		if err := session().Set("gorm:table_options", serverRunOptions).AutoMigrate(&ServerRun{}); err != nil {
			return err
		}
		if err := checkServerRunsEngine(session()); err != nil {
			return err
		}
		return binaryCollation(session)
	})
	if denied(err) {
		return fmt.Errorf("inventory: migrate: %w (the migration needs SELECT, CREATE, ALTER and INDEX on the schema: grant them, or give the migration a user of its own, MYSQL_MIGRATE_DSN): %w", ErrMissingPrivilege, err)
	}
	if err != nil {
		return fmt.Errorf("inventory: migrate: %w", err)
	}
	return nil
}

// denied reports whether err is the server refusing a statement for a privilege the user lacks:
// 1044 (on a database), 1142 (on a table), 1143 (on a column), 1227 (a global privilege).
func denied(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1044, 1142, 1143, 1227:
		return true
	}
	return false
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("inventory: ping: %w", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("inventory: ping: %w", err)
	}
	return nil
}

// PoolStats is the connection pool's: its connections, and the statements that waited for one.
func (s *Store) PoolStats() sql.DBStats { return s.sqlDB.Stats() }

// Close closes the pool.
func (s *Store) Close() error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("inventory: close: %w", err)
	}
	if err := sqlDB.Close(); err != nil {
		return fmt.Errorf("inventory: close: %w", err)
	}
	return nil
}

// Reset creates the product or sets its stock and initial stock to stock, and deletes its
// orders, in one transaction. The fence token is kept: tokens only grow, and a holder still in
// flight from before the reset must stay fenced off.
func (s *Store) Reset(ctx context.Context, sku string, stock int64) (Product, error) {
	var p Product
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		now := s.now().UTC()
		if err := tx.Exec(`INSERT INTO products (sku, stock, initial_stock, fence_token, lost_high, lost_low, updated_at) VALUES (?, ?, ?, 0, 0, 0, ?)
			ON DUPLICATE KEY UPDATE stock = VALUES(stock), initial_stock = VALUES(initial_stock), lost_high = 0, lost_low = 0, updated_at = VALUES(updated_at)`,
			sku, stock, stock, now).Error; err != nil {
			return err
		}
		if err := tx.Where("sku = ?", sku).Delete(&Order{}).Error; err != nil {
			return err
		}
		return tx.Where("sku = ?", sku).Take(&p).Error
	})
	if err != nil {
		return Product{}, fmt.Errorf("inventory: reset %s: %w", sku, err)
	}
	return p, nil
}

// Product reads one product.
func (s *Store) Product(ctx context.Context, sku string) (Product, error) {
	var p Product
	err := s.db.WithContext(ctx).Where("sku = ?", sku).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Product{}, ErrUnknownSKU
	}
	if err != nil {
		return Product{}, fmt.Errorf("inventory: read %s: %w", sku, err)
	}
	return p, nil
}

// OrderByRequestID finds the order recorded under an idempotency key.
func (s *Store) OrderByRequestID(ctx context.Context, requestID string) (Order, bool, error) {
	return orderByRequestID(s.db.WithContext(ctx), requestID)
}

func orderByRequestID(db *gorm.DB, requestID string) (Order, bool, error) {
	var o Order
	err := db.Where("request_id = ?", requestID).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("inventory: look up request %q: %w", requestID, err)
	}
	return o, true, nil
}

// OrderByID finds one order; found is false when there is none.
func (s *Store) OrderByID(ctx context.Context, id int64) (o Order, found bool, err error) {
	err = s.db.WithContext(ctx).Where("id = ?", id).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("inventory: look up order %d: %w", id, err)
	}
	return o, true, nil
}

// OrdersPage lists up to limit of a SKU's orders with ids above after, in id order (newest
// last): a page, and after the last id on it, the next.
func (s *Store) OrdersPage(ctx context.Context, sku string, after int64, limit int) ([]Order, error) {
	os := []Order{}
	if err := s.db.WithContext(ctx).Where("sku = ? AND id > ?", sku, after).Order("id").Limit(limit).Find(&os).Error; err != nil {
		return nil, fmt.Errorf("inventory: orders of %s after %d: %w", sku, after, err)
	}
	return os, nil
}

// Orders lists a SKU's orders in id order.
func (s *Store) Orders(ctx context.Context, sku string) ([]Order, error) {
	var os []Order
	if err := s.db.WithContext(ctx).Where("sku = ?", sku).Order("id").Find(&os).Error; err != nil {
		return nil, fmt.Errorf("inventory: orders of %s: %w", sku, err)
	}
	return os, nil
}
