package galeraprobe_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/zkstock/zkstock/internal/galeraprobe"
	"github.com/zkstock/zkstock/internal/testenv"
)

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// On the cluster of make test-galera: reads through node 2 with wsrep_sync_wait=1 are never
// stale; with 0 some may be (counted, not asserted: it is a race); a reader that cannot see new
// writes at all (a transaction's snapshot) is counted stale on every read after the first, which
// shows that the count can fail; and a product that does not exist is named.
func TestGaleraStaleReads(t *testing.T) {
	ctx := context.Background()
	nodes := testenv.GaleraDatabase(t)
	writer := open(t, nodes[0])
	if _, err := writer.ExecContext(ctx, "CREATE TABLE products (sku VARCHAR(64) PRIMARY KEY, stock BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.ExecContext(ctx, "INSERT INTO products VALUES ('P-1', 0)"); err != nil {
		t.Fatal(err)
	}
	const n = 500
	causal, err := galeraprobe.StaleReads(ctx, writer, open(t, testenv.WithDSNParam(t, nodes[1], "wsrep_sync_wait", "1")), "P-1", n)
	if err != nil {
		t.Fatal(err)
	}
	if causal.Reads != n || causal.Stale != 0 {
		t.Errorf("wsrep_sync_wait=1: %+v, want %d reads, none stale", causal, n)
	}
	plain, err := galeraprobe.StaleReads(ctx, writer, open(t, testenv.WithDSNParam(t, nodes[1], "wsrep_sync_wait", "0")), "P-1", n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wsrep_sync_wait=0: %d of %d stale, up to %d behind", plain.Stale, plain.Reads, plain.Behind)

	tx, err := open(t, testenv.WithDSNParam(t, nodes[1], "wsrep_sync_wait", "1")).BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	frozen, err := galeraprobe.StaleReads(ctx, writer, tx, "P-1", 20)
	if err != nil {
		t.Fatal(err)
	}
	if frozen.Stale != 19 || frozen.Behind != 19 {
		t.Errorf("a snapshot's reads: %+v, want 19 stale, 19 behind", frozen)
	}
	if _, err := galeraprobe.StaleReads(ctx, writer, writer, "NOPE", 1); !errors.Is(err, galeraprobe.ErrNoProduct) {
		t.Errorf("a product that does not exist: %v, want ErrNoProduct", err)
	}
}
