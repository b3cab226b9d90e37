package inventory

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"
)

// ServerConn names one connection of one run of the database server. MariaDB numbers its
// connections from 1 again every time it starts, so an id alone may name a stranger's connection
// (another replica's, under the same user) once the server has restarted: the run tells them
// apart.
type ServerConn struct {
	ID  int64  // CONNECTION_ID()
	Run string // the mark of the server's run the connection was on (server_runs); "" when not known
	// Addr is the server's address as the store's DSN gives it: on a cluster, the node the
	// connection was on, the only one that can end its transaction (Cluster.StoreAt).
	Addr string
}

// ServerRun is the one row of server_runs, a MEMORY table, which every start of the server
// empties: the first connection of a run to look finds no row and inserts a random mark, and
// every connection of that run then reads the same mark, and none of another run does. Reading
// and writing it needs SELECT and INSERT on the table alone: no privilege over other users'
// threads or the server's state.
type ServerRun struct {
	ID  int8   `gorm:"column:id;primaryKey;autoIncrement:false"`
	Run string `gorm:"column:run;size:32;not null"`
}

func (ServerRun) TableName() string { return "server_runs" }

// serverRunOptions make server_runs a MEMORY table (see ServerRun).
const serverRunOptions = "ENGINE=MEMORY"

// checkServerRunsEngine refuses a server_runs that is not a MEMORY table (made by hand, or by a
// server that substituted another engine): its mark would outlive a restart, and a connection id
// of an earlier run would again name a stranger.
func checkServerRunsEngine(db *gorm.DB) error {
	var engine string
	if err := db.Raw("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'server_runs'").
		Row().Scan(&engine); err != nil {
		return fmt.Errorf("read server_runs' engine: %w", err)
	}
	if !strings.EqualFold(engine, "MEMORY") {
		return fmt.Errorf("%w: server_runs' engine is %s, not MEMORY: its mark would outlive a restart of the server; drop it, and migrate again", ErrMisconfigured, engine)
	}
	return nil
}

// runColumn reads the run's mark, NULL when this run has none yet (runMark sets it).
const runColumn = "(SELECT run FROM server_runs WHERE id = 1)"

// querier is a connection, or a transaction on one: the statements of runMark run on it, so that
// the mark is the run of that connection.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// runMark is the mark of the run q is on, given what runColumn read on it: that, or, when the
// run has none yet, the mark the first connection to set one set.
func runMark(ctx context.Context, q querier, read sql.NullString) (string, error) {
	if read.Valid {
		return read.String, nil
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mark the server's run: %w", err)
	}
	if _, err := q.ExecContext(ctx, "INSERT IGNORE INTO server_runs (id, run) VALUES (1, ?)", hex.EncodeToString(b[:])); err != nil {
		return "", fmt.Errorf("mark the server's run: %w", err)
	}
	var mark string
	if err := q.QueryRowContext(ctx, "SELECT run FROM server_runs WHERE id = 1").Scan(&mark); err != nil {
		return "", fmt.Errorf("read the server's run: %w", err)
	}
	return mark, nil
}

// onRunOf runs f on a connection of the pool if the server still runs the run conn was on;
// gone says it does not, or that conn is the very connection taken (back in the pool, so its
// transaction has ended): either way conn's transaction is over, and f does not run. The check
// and f share one connection, which cannot outlive the run it checked.
func (s *Store) onRunOf(ctx context.Context, conn ServerConn, f func(*sql.Conn) error) (gone bool, err error) {
	if conn.ID == 0 || conn.Run == "" {
		return false, errors.New("its connection is not known")
	}
	if conn.Addr != "" && conn.Addr != s.addr {
		// Another node's connection: its id and run mean nothing here (each node has its own
		// server_runs, a MEMORY table, which Galera does not replicate). A connection made at
		// another address is refused even when one server may stand behind both: its transaction
		// stays unknown rather than be ended, or a stranger killed, on a guess.
		return false, fmt.Errorf("the connection is on %s, not on this store's %s", conn.Addr, s.addr)
	}
	c, err := s.sqlDB.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	var own int64
	var read sql.NullString
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID(), "+runColumn).Scan(&own, &read); err != nil {
		return false, err
	}
	mark, err := runMark(ctx, c, read)
	if err != nil {
		return false, err
	}
	if mark != conn.Run || own == conn.ID {
		return true, nil
	}
	return false, f(c)
}
