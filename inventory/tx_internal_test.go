package inventory

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
)

// throughBlackHole opens a store on a fresh database through a MySQL proxy, and one straight to the
// server (with a long read timeout, to watch the stranded transaction's row lock from outside).
func throughBlackHole(t *testing.T) (proxied, direct *Store, proxy *tcpproxy.Proxy) {
	t.Helper()
	ctx := context.Background()
	dsn := testenv.MySQLDatabase(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy = tcpproxy.NewMySQL(t, cfg.Addr)
	viaProxy := cfg.Clone()
	viaProxy.Addr = proxy.Addr()
	proxied, err = Open(ctx, viaProxy.FormatDSN(), PoolOptions{MaxOpen: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxied.Close() })
	long := cfg.Clone()
	long.ReadTimeout = time.Minute
	direct, err = Open(ctx, long.FormatDSN(), PoolOptions{MaxOpen: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	if err := direct.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Reset(ctx, "BH-1", 10); err != nil {
		t.Fatal(err)
	}
	return proxied, direct, proxy
}

func isCommit(q string) bool { return strings.EqualFold(q, "COMMIT") }

// blackHoledCommit runs a transaction that takes one unit, on the proxied store, with its COMMIT
// swallowed by a black hole, and says what inTx answered and when.
func blackHoledCommit(t *testing.T, ctx context.Context, s *Store, proxy *tcpproxy.Proxy) (time.Duration, error) {
	t.Helper()
	proxy.BlackHoleQuery(isCommit)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- s.inTx(ctx, ctx, func(tx *gorm.DB) error {
			return tx.Exec("UPDATE products SET stock = stock - 1 WHERE sku = ?", "BH-1").Error
		})
	}()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-time.After(30 * time.Second):
		t.Fatal("inTx still waits for its COMMIT's answer after 30 s")
		return 0, nil
	}
}

// A COMMIT whose connection turned into a black hole (open, nothing arrives) gives up at the
// context's deadline, not at TCP's, with ErrOutcomeUnknown.
func TestCommitGivesUpAtTheDeadline(t *testing.T) {
	s, _, proxy := throughBlackHole(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	took, err := blackHoledCommit(t, ctx, s, proxy)
	t.Logf("inTx answered after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("inTx: %v, want ErrOutcomeUnknown", err)
	}
	if took > 1500*time.Millisecond {
		t.Fatalf("inTx gave up after %v; the context's deadline was 1 s", took)
	}
}

// Without a deadline, Open's read timeout (10 s) bounds the wait for the COMMIT's answer, and the
// server ends the stranded session (wait_timeout, which Open sets) within CommitBound of its last
// packet: the transaction rolls back and its row lock goes, though the client's close never
// reached the server.
func TestBlackHoledCommitIsBoundedAndRolledBack(t *testing.T) {
	s, direct, proxy := throughBlackHole(t)
	var got struct{ WaitTimeout int64 }
	if err := s.db.Raw("SELECT @@SESSION.wait_timeout AS wait_timeout").Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	if time.Duration(got.WaitTimeout)*time.Second != commitIdleTimeout {
		t.Fatalf("session wait_timeout %d s, want %v", got.WaitTimeout, commitIdleTimeout)
	}
	sent := time.Now()
	unlocked := make(chan time.Duration, 1)
	go func() {
		time.Sleep(500 * time.Millisecond) // behind the stranded transaction's row lock
		err := direct.db.Exec("UPDATE products SET updated_at = updated_at WHERE sku = ?", "BH-1").Error
		if err != nil {
			t.Errorf("update behind the stranded transaction: %v", err)
		}
		unlocked <- time.Since(sent)
	}()
	took, err := blackHoledCommit(t, context.Background(), s, proxy)
	t.Logf("inTx answered after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("inTx: %v, want ErrOutcomeUnknown", err)
	}
	if took > defaultReadTimeout+2*time.Second {
		t.Fatalf("inTx waited %v for its COMMIT; the read timeout is %v", took, defaultReadTimeout)
	}
	var after time.Duration
	select {
	case after = <-unlocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the stranded transaction still holds its row lock after 30 s")
	}
	t.Logf("the stranded transaction's row lock went %v after its COMMIT was swallowed", after.Round(time.Millisecond))
	if after > s.CommitBound() {
		t.Fatalf("row lock held %v, more than CommitBound %v", after, s.CommitBound())
	}
	p, err := direct.Product(context.Background(), "BH-1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Stock != 10 {
		t.Fatalf("stock %d: the swallowed COMMIT applied", p.Stock)
	}
}
