package inventory_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// serviceStore is a migrated test database, served as the service's user (MYSQL_DSN's grants).
func serviceStore(t *testing.T) (store *inventory.Store, serviceDSN, adminDSN string) {
	t.Helper()
	adminDSN = testenv.MySQLDatabase(t)
	openStoreAt(t, adminDSN) // migrated by the database's owner
	serviceDSN = testenv.ServiceDSN(t, adminDSN)
	testenv.RequireServiceUser(t, adminDSN, serviceDSN)
	s, err := inventory.Open(context.Background(), serviceDSN, inventory.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, serviceDSN, adminDSN
}

func mysqlErrno(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// The service's user sells, and can do nothing else: no DDL, no other schema, no server state, no
// user table. Run as root (as MYSQL_DSN was before), every statement below succeeds.
func TestServiceUserHasOnlyItsRows(t *testing.T) {
	ctx := context.Background()
	s, serviceDSN, _ := serviceStore(t)
	mustReset(t, s, "PRIV-1", 3)
	if _, err := s.Deduct(ctx, inventory.Purchase{SKU: "PRIV-1", Qty: 1, Replica: "r1", Token: 1}, inventory.Fenced, inventory.Hooks{}); err != nil {
		t.Fatalf("the service's user cannot sell: %v", err)
	}
	other := testenv.MySQLDatabase(t) // another schema, with a table in it
	testenv.Exec(t, other, "CREATE TABLE secrets (v INT)", "INSERT INTO secrets VALUES (1)")
	otherCfg, err := mysql.ParseDSN(other)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", serviceDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	o := "`" + otherCfg.DBName + "`"
	for _, stmt := range []string{
		"DROP TABLE products",
		"TRUNCATE TABLE orders",
		"ALTER TABLE products ADD COLUMN x INT",
		"CREATE TABLE more (id INT)",
		"DROP DATABASE " + o,
		"SELECT v FROM " + o + ".secrets",
		"INSERT INTO " + o + ".secrets VALUES (2)",
		"CREATE DATABASE zkstock_other",
		"SELECT User, Password FROM mysql.user",
		"SET GLOBAL max_connections = 10",
		"GRANT ALL ON *.* TO CURRENT_USER()",
	} {
		_, err := db.ExecContext(ctx, stmt)
		switch n := mysqlErrno(err); n {
		case 1044, 1045, 1142, 1227, 1410:
		default:
			t.Errorf("%s as the service's user: %v (errno %d), want access denied", stmt, err, n)
		}
	}
}

// A service user that may not create or alter tables cannot migrate a database that needs it:
// the start fails at once, with the server's refusal (which names the privilege) and what to do.
func TestMigrationWithoutPrivilegesSaysWhich(t *testing.T) {
	ctx := context.Background()
	fresh := testenv.MySQLDatabase(t)
	svc := testenv.ServiceDSN(t, fresh)
	testenv.RequireServiceUser(t, fresh, svc)
	s, err := inventory.Open(ctx, svc, inventory.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Migrate(ctx)
	if !errors.Is(err, inventory.ErrMissingPrivilege) || !errors.Is(err, inventory.ErrMisconfigured) ||
		!strings.Contains(err.Error(), "CREATE command denied") || !strings.Contains(err.Error(), "MYSQL_MIGRATE_DSN") {
		t.Fatalf("migration as the service's user: %v; want ErrMissingPrivilege naming CREATE and MYSQL_MIGRATE_DSN", err)
	}
}

// The migration's own user (MYSQL_MIGRATE_DSN, scripts/mysql-init/zkstock-users.sh's grants)
// creates the tables, and the service's user then sells on them; the service's user may run the
// migration on tables already current (a replica started without MYSQL_MIGRATE_DSN).
func TestMigrationUserThenServiceUser(t *testing.T) {
	migrateDSN := os.Getenv("MYSQL_MIGRATE_DSN")
	if migrateDSN == "" {
		if os.Getenv("MYSQL_ADMIN_DSN") != "" { // scripts/servers.sh's MariaDB: it must have the user
			t.Fatal("MYSQL_ADMIN_DSN is set but MYSQL_MIGRATE_DSN is not")
		}
		t.Skip("MYSQL_MIGRATE_DSN is not set")
	}
	ctx := context.Background()
	fresh := testenv.MySQLDatabase(t)
	m, err := inventory.Open(ctx, testenv.AsUser(t, fresh, migrateDSN), inventory.PoolOptions{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Migrate(ctx); err != nil {
		t.Fatalf("migration as MYSQL_MIGRATE_DSN's user: %v", err)
	}
	if _, err := m.Reset(ctx, "PRIV-M", 1); err == nil {
		t.Fatal("the migration's user wrote a row: it needs no INSERT")
	}
	s, err := inventory.Open(ctx, testenv.ServiceDSN(t, fresh), inventory.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("the service's user's migration of current tables: %v", err)
	}
	mustReset(t, s, "PRIV-M", 2)
	if _, err := s.Deduct(ctx, inventory.Purchase{SKU: "PRIV-M", Qty: 2, Replica: "r1", Token: 1}, inventory.Fenced, inventory.Hooks{}); err != nil {
		t.Fatal(err)
	}
}

// The stuck-COMMIT resolution (EndTransaction: KILL CONNECTION, then information_schema.PROCESSLIST)
// works as the service's user without PROCESS, SUPER or CONNECTION ADMIN: MariaDB lets a user see
// and kill its own user's connections. Another user's connection it can neither see nor kill.
func TestServiceUserEndsItsOwnConnections(t *testing.T) {
	ctx := context.Background()
	s, serviceDSN, adminDSN := serviceStore(t)
	connOf := func(dsn string) (*sql.Conn, inventory.ServerConn) {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The connection as a transaction names it: its id and the mark of the server's run.
		if _, err := c.ExecContext(ctx, "INSERT IGNORE INTO server_runs (id, run) VALUES (1, 'test-run')"); err != nil {
			t.Fatal(err)
		}
		var conn inventory.ServerConn
		if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID(), run FROM server_runs WHERE id = 1").Scan(&conn.ID, &conn.Run); err != nil {
			t.Fatal(err)
		}
		return c, conn
	}
	_, own := connOf(serviceDSN)
	if alive, err := s.ConnectionAlive(ctx, own); err != nil || !alive {
		t.Fatalf("the service's user does not see its own connection %d: %v %v", own.ID, alive, err)
	}
	if err := s.EndTransaction(ctx, own); err != nil {
		t.Fatalf("the service's user cannot end its own connection: %v", err)
	}
	if alive, err := s.ConnectionAlive(ctx, own); err != nil || alive {
		t.Fatalf("connection %d alive after EndTransaction: %v %v", own.ID, alive, err)
	}
	_, root := connOf(adminDSN)
	if alive, err := s.ConnectionAlive(ctx, root); err != nil || alive {
		t.Fatalf("the service's user sees another user's connection: %v %v", alive, err)
	}
	if err := s.EndTransaction(ctx, root); mysqlErrno(err) != 1095 { // 1095: not the thread's owner
		t.Fatalf("the service's user ending another user's connection: %v, want errno 1095", err)
	}
}
