package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// The settings the service's guarantees rest on, read back from the server at Open.
//
// On a Galera node (wsrep_on=ON) three more hold, besides what every server must have:
//   - Causal reads. A node applies the write sets of the others' commits asynchronously, so a
//     plain read there may miss a commit that another node has acknowledged: a stock read after
//     a failover, or after another replica's write, would be stale, and a sale from it an
//     oversell or a lost update that no lock prevents. wsrep_sync_wait's bit 1 makes every read
//     (SELECT, and START TRANSACTION, which fixes a transaction's snapshot) first wait until the
//     node has applied every write set the cluster had ordered when it was sent. Open sets
//     wsrep_sync_wait=1 on every connection of its pool unless the DSN sets a value, and refuses a
//     session value without bit 1: the service's own sessions must be causal whatever the
//     server's global default (0, Galera's) says.
//   - Durable commits: innodb_flush_log_at_trx_commit=1. With 0 or 2 a commit acknowledged by
//     every node may still be lost when all of them lose power at once (a cluster's nodes usually
//     share a fate: a rack, a zone, a bad release), and a sold order would vanish.
//   - A node in the primary component, Synced: wsrep_ready=ON. A node outside it refuses every
//     query (1047); one joining or donating may serve stale data. This is a state, not a setting:
//     Open answers ErrNodeNotReady, which a retry (or another node: Cluster) may cure.
//
// On a server without Galera nothing more is checked than before: the session's character set
// (checkCharset) and its wait_timeout (checkWaitTimeout).

// SettingError is a server setting under which the service's guarantees do not hold: Open
// refuses it. errors.Is(err, ErrMisconfigured) holds for it.
type SettingError struct {
	Name  string // the variable
	Value string // as the server reported it
	Want  string // what would be safe
	Why   string // what would break
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("%v: %s is %s, must be %s: %s", ErrMisconfigured, e.Name, e.Value, e.Want, e.Why)
}

func (e *SettingError) Unwrap() error { return ErrMisconfigured }

// ErrNodeNotReady: the Galera node is not a Synced member of the primary component (wsrep_ready is
// OFF, or the node is joining, donating or cut off). A retry later, or another node, may succeed.
var ErrNodeNotReady = errors.New("inventory: the Galera node is not ready (not Synced in the primary component)")

// syncWaitReads is wsrep_sync_wait's bit for reads (SELECT, SHOW, START TRANSACTION).
const syncWaitReads = 1

// galeraOn says whether the server at cfg runs Galera replication: wsrep_on is ON globally (a
// server without the variable, MySQL, does not). It opens one connection of its own.
func galeraOn(ctx context.Context, cfg *mysql.Config) (bool, error) {
	probe := cfg.Clone()
	// the probe's session runs nothing that needs them, and a value a server refuses must fail
	// at Open's own connection, with its own message
	probe.Params = nil
	connector, err := mysql.NewConnector(probe)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrMisconfigured, err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	var name, value string
	err = db.QueryRowContext(ctx, "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'").Scan(&name, &value)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("inventory: read wsrep_on at %s: %w", cfg.Addr, err)
	}
	return strings.EqualFold(value, "ON"), nil
}

// checkGalera reads back, on a session of the pool, the settings a Galera node must have (see the
// top of this file) and its state. SHOW, not SELECT: with wsrep_sync_wait=1 a SELECT first waits
// for the cluster, and a node whose peers are failing would hold it for seconds.
func (s *Store) checkGalera(ctx context.Context) error {
	c, err := s.sqlDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("inventory: read Galera's settings: %w", err)
	}
	defer c.Close()
	vars, err := show(ctx, c, "SHOW SESSION VARIABLES WHERE Variable_name IN ('wsrep_sync_wait', 'innodb_flush_log_at_trx_commit')")
	if err != nil {
		return fmt.Errorf("inventory: read Galera's settings: %w", err)
	}
	syncWait, err := strconv.ParseInt(vars["wsrep_sync_wait"], 10, 64)
	if (err != nil || syncWait&syncWaitReads == 0) && !plantedStaleReads {
		return &SettingError{Name: "wsrep_sync_wait", Value: vars["wsrep_sync_wait"], Want: "a value with bit 1 set (1, 3, 7, ...), or unset in the DSN (the service sets 1)",
			Why: "a read on this node could miss a commit another node has acknowledged, and a sale from a stale stock oversells or loses an update"}
	}
	if flush := vars["innodb_flush_log_at_trx_commit"]; flush != "1" && !plantedUnsafeFlush {
		return &SettingError{Name: "innodb_flush_log_at_trx_commit", Value: flush, Want: "1",
			Why: "a commit acknowledged by every node is lost when they all lose power at once, and a sold order vanishes"}
	}
	return nodeReady(ctx, c, true)
}

// show runs a SHOW statement of name and value rows on c: the values by lower-cased name.
func show(ctx context.Context, c *sql.Conn, q string) (map[string]string, error) {
	rows, err := c.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		out[strings.ToLower(name)] = value
	}
	return out, rows.Err()
}

// nodeReady answers ErrNodeNotReady unless the node on c is a member of the primary component
// that accepts queries (wsrep_ready), and Synced too when synced says so. A node that is neither
// may still be a fine writer: a donor of an incremental transfer (Donor/Desynced) keeps
// certifying and applying in order, and the service's reads wait for the cluster anyway.
func nodeReady(ctx context.Context, c *sql.Conn, synced bool) error {
	status, err := show(ctx, c, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_local_state_comment', 'wsrep_cluster_status')")
	if err != nil {
		return fmt.Errorf("inventory: read the node's state: %w", err)
	}
	if !strings.EqualFold(status["wsrep_ready"], "ON") || status["wsrep_cluster_status"] != "Primary" ||
		synced && status["wsrep_local_state_comment"] != "Synced" {
		return fmt.Errorf("%w: wsrep_ready %s, state %s, component %s", ErrNodeNotReady,
			status["wsrep_ready"], status["wsrep_local_state_comment"], status["wsrep_cluster_status"])
	}
	return nil
}

// nodeErr is err, and ErrNodeNotReady too when the server refused a statement that takes no row
// lock because its node is not in the primary component: 1047 (ER_UNKNOWN_COM_ERROR, Galera's
// "WSREP has not yet prepared node for application use"), or, on a Galera node, 1205 (a causal
// read that timed out waiting for the cluster: the node is cut off and does not know it yet).
func nodeErr(err error, galera bool) error {
	var me *mysql.MySQLError
	if errors.Is(err, ErrNodeNotReady) || !errors.As(err, &me) {
		return err
	}
	if me.Number == 1047 || galera && me.Number == 1205 {
		return fmt.Errorf("%w: %w", ErrNodeNotReady, err)
	}
	return err
}
