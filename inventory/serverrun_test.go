package inventory_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// restartMySQL stops the test's MariaDB and starts it again on the same port and data, and waits
// until dsn's database answers: it numbers its connections from 1 again.
func restartMySQL(t *testing.T, dsn string) {
	t.Helper()
	dir := os.Getenv("MYSQL_DIR")
	if dir == "" {
		t.Fatal("MYSQL_DIR is not set: run the test under scripts/servers.sh")
	}
	testenv.ServersScript(t, "stop-server", dir)
	testenv.ServersScript(t, "start-server", dir)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(60 * time.Second); db.Ping() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("MariaDB did not answer within 60 s of its start")
		}
	}
}

// connWithID opens connections to dsn, one after another, until the server gives one the id
// want, and returns it open: a stranger's connection that has the id of another, gone one.
func connWithID(t *testing.T, dsn string, want int64) *sql.Conn {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxIdleConns(0) // every Conn a new connection
	ctx := context.Background()
	for {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		switch {
		case id == want:
			t.Cleanup(func() { _ = c.Close() })
			return c
		case id > want:
			t.Fatalf("the server's connection ids passed %d (at %d) without giving it", want, id)
		}
		_ = c.Close()
	}
}

// After the database restarted, the id of a transaction's connection whose COMMIT went
// unanswered may be another's: MariaDB numbers connections from 1 again. Ending that transaction
// must not KILL the stranger (another replica's transaction), and the stranger must not be taken
// for the transaction still alive (which kept the SKU's lock for as long as it lived): the
// transaction ended with the server's run.
//
// It restarts the shared MariaDB, which every package of `make test` uses at once, so it runs
// with the fault suite (`make test-faults`, ZKSTOCK_FAULTS=1), whose servers are its own.
func TestEndTransactionAfterARestartLeavesAStrangerAlone(t *testing.T) {
	if os.Getenv("ZKSTOCK_FAULTS") != "1" {
		t.Skip("restarts the shared MariaDB: run by make test-faults (ZKSTOCK_FAULTS=1)")
	}
	dsn := testenv.MySQLDatabase(t)
	restartMySQL(t, dsn) // ids from 1: the transaction's is small, and a stranger reaches it soon
	proxy, proxied := tcpproxy.ProxiedDSN(t, dsn, nil)
	first, other := openStoreAt(t, proxied), openStoreAt(t, dsn)
	ctx := context.Background()
	const sku = "RESTARTED"
	mustReset(t, other, sku, 10)
	fired := proxy.DropQueryAndHold(func(q string) bool { return strings.EqualFold(q, "COMMIT") })
	_, unanswered := first.Deduct(ctx, inventory.Purchase{SKU: sku, Qty: 1, RequestID: "restarted"}, inventory.CAS, inventory.Hooks{})
	<-fired
	if !errors.Is(unanswered, inventory.ErrOutcomeUnknown) {
		t.Fatalf("the purchase: %v, want ErrOutcomeUnknown", unanswered)
	}
	// Made through the proxy, asked about at the server's own address: one server.
	conn := inventory.ConnAtForTest(inventory.UnansweredConn(unanswered), serverAddr(t, dsn))
	id := inventory.ConnIDForTest(conn)
	if id == 0 {
		t.Fatal("the unanswered COMMIT names no connection")
	}
	restartMySQL(t, dsn)
	stranger := connWithID(t, dsn, id)
	if _, err := stranger.ExecContext(ctx, "START TRANSACTION"); err != nil {
		t.Fatal(err)
	}

	alive, err := other.ConnectionAlive(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if alive {
		t.Errorf("connection %d of the transaction is alive after the server restarted: the stranger with its id was taken for it", id)
	}
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := other.EndTransaction(ectx, conn); err != nil {
		t.Errorf("end the transaction after the server restarted: %v", err)
	}
	var one int
	if err := stranger.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Errorf("the stranger with connection id %d after the transaction was ended: %v (killed in its place)", id, err)
	}
}

// server_runs must be a MEMORY table, which every start of the server empties: one that is not
// (made so by hand, or by a server that substitutes another engine for MEMORY) keeps its mark
// across restarts, and a connection id of an earlier run would again name a stranger. The
// migration refuses it.
func TestMigrateRefusesServerRunsThatOutliveARestart(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	testenv.Exec(t, dsn, "CREATE TABLE server_runs (id TINYINT PRIMARY KEY, run VARCHAR(32) NOT NULL) ENGINE=InnoDB")
	ctx := context.Background()
	s, err := inventory.Open(ctx, dsn, inventory.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	err = s.Migrate(ctx)
	if !errors.Is(err, inventory.ErrMisconfigured) || !strings.Contains(err.Error(), "MEMORY") {
		t.Fatalf("migrate with an InnoDB server_runs: %v; want ErrMisconfigured naming MEMORY", err)
	}
}

// serverAddr is the address dsn reaches its server at, as a store opened on it names it.
func serverAddr(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Addr
}
