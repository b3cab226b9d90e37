package order_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// metricValue reads one counter of a replica's metrics, 0 when it is absent.
func metricValue(t *testing.T, r *replica, name string) int {
	t.Helper()
	for _, l := range strings.Split(call(t, "GET", r.URL+"/metrics", "").raw, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			var n int
			if _, err := fmt.Sscan(v, &n); err != nil {
				t.Fatalf("metric %q: %v", l, err)
			}
			return n
		}
	}
	return 0
}

// A COMMIT that reached the server and is stuck executing there (BACKUP STAGE BLOCK_COMMIT held by
// another session) outlives any bound counted from when it was sent. The holder gave up on it,
// answered outcome_unknown and released the lock at CommitBound; the next holder's plain read
// missed the COMMIT that applied later, and its write overwrote it: lost_updates 1. Reproduced as
// in the issue, two replicas in zk-unfenced, with a 1 s read timeout on the first so that it
// gives up on its COMMIT sooner.
func TestCommitStuckOnTheServerIsNotOverwritten(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	quick, patient := cfg.Clone(), cfg.Clone()
	quick.ReadTimeout = time.Second
	patient.ReadTimeout = 30 * time.Second // waits out the backup, whenever its lock comes
	held := ordertest.Start(t, 1, ordertest.Options{Mode: order.ModeZKUnfenced, DSN: quick.FormatDSN()})[0]
	next := ordertest.Start(t, 1, ordertest.Options{Mode: order.ModeZKUnfenced, DSN: patient.FormatDSN(), FirstNumber: 2})[0]
	const sku = "REVIEW-STUCK"
	resetStock(t, next, sku, 10)

	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	backup, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	endBackup := func() {
		if _, err := backup.ExecContext(ctx, "BACKUP STAGE END"); err != nil {
			t.Errorf("BACKUP STAGE END: %v", err)
		}
	}
	t.Cleanup(func() { _ = backup.Close() })
	for _, q := range []string{"BACKUP STAGE START", "BACKUP STAGE BLOCK_COMMIT"} {
		if _, err := backup.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	blocked := time.Now()
	ended := false
	defer func() {
		if !ended {
			endBackup()
		}
	}()
	// Keys the service makes: a client's key is held in the database before the lock, and that
	// INSERT would wait for the backup lock itself, before the COMMIT this test is about.
	first := make(chan reply, 1)
	go func() { first <- buy(t, held, sku, 1, "") }()
	waitForStuckCommit(t, db)
	second := make(chan reply, 1)
	go func() { second <- buy(t, next, sku, 1, "") }()
	// Past the 12 s at which the holder released its lock (its 1 s read timeout, then
	// CommitBound), so that the next holder's read came before the stuck COMMIT applied.
	time.Sleep(14*time.Second - time.Since(blocked))
	endBackup()
	ended = true
	one, two := <-first, <-second
	t.Logf("held: %s; next: %s", one.raw, two.raw)

	stuck, stuckFound, err := held.Store.OrderByRequestID(ctx, one.header.Get("Idempotency-Key"))
	if err != nil {
		t.Fatal(err)
	}
	_, afterFound, err := next.Store.OrderByRequestID(ctx, two.header.Get("Idempotency-Key"))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case one.status == 201 && (!stuckFound || stuck.ID != one.orderID()):
		t.Errorf("held purchase answered 201 %s, but its order is not there", one.raw)
	case one.status != 201 && one.code() != "outcome_unknown" && stuckFound:
		t.Errorf("held purchase answered %d %s (nothing sold), but its order %d was committed", one.status, one.raw, stuck.ID)
	}
	if two.status != 201 || !afterFound {
		t.Errorf("next purchase: %d %s (order committed: %v), want 201", two.status, two.raw, afterFound)
	}
	a := auditOf(t, next, sku)
	if a.LostUpdates != 0 || a.Oversold != 0 || a.Stock != a.InitialStock-a.UnitsSold {
		t.Fatalf("audit %+v: the stuck COMMIT and the next holder's write overwrote one another", a)
	}
}

// waitForStuckCommit waits until a COMMIT waits for the backup lock on the server.
func waitForStuckCommit(t *testing.T, db *sql.DB) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var n int
		err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'COMMIT'").Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("no COMMIT waited for the backup lock within 10 s")
}

// A table lock's TTL must outlast the longest hold of a live holder, or a waiter takes over a lock
// still held and its plain read misses the holder's write. It was 30 s: a holder with the work
// WORK_DELAY allows (8 s), whose COMMIT went unanswered for the read timeout (10 s) and then
// settled for CommitBound (11 s), released at 31 s or later. The TTL is derived from those now.
func TestTableLockOutlastsTheLongestHold(t *testing.T) {
	const work, readTimeout = 8 * time.Second, 10 * time.Second
	dsn := testenv.MySQLDatabase(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ReadTimeout = readTimeout
	r := newCluster(t, 1, clusterOpts{Mode: order.ModeDBLockTable, DSN: cfg.FormatDSN(), WorkDelay: work})[0]
	const sku = "REVIEW-TTL"
	resetStock(t, r, sku, 10)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	answer := make(chan reply, 1)
	go func() { answer <- buy(t, r, sku, 1, "") }()
	var left time.Duration
	for deadline := time.Now().Add(work); ; time.Sleep(10 * time.Millisecond) {
		var us int64
		err := db.QueryRow("SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM table_locks WHERE name = ?", "sku:"+sku).Scan(&us)
		if err == nil {
			left = time.Duration(us) * time.Microsecond
			break
		}
		if !errors.Is(err, sql.ErrNoRows) || time.Now().After(deadline) {
			t.Fatalf("the holder's lock row: %v", err)
		}
	}
	if hold := work + readTimeout + r.Store.CommitBound() + 2*time.Second; left < hold {
		t.Errorf("the lock row, just taken, expires in %v; a holder may hold it %v (work, COMMIT unanswered, commit bound, release)",
			left.Round(time.Millisecond), hold)
	}
	if rep := <-answer; rep.status != 201 {
		t.Fatalf("purchase: %d %s", rep.status, rep.raw)
	}
}
