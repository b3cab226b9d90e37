package inventory

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
)

// inTransaction says whether the pool's connection is inside a transaction (MariaDB's
// @@in_transaction), asked on the one connection a pool of one holds.
func inTransaction(t *testing.T, ctx context.Context, s *Store) bool {
	t.Helper()
	var in int
	if err := s.sqlDB.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&in); err != nil {
		t.Fatalf("ask the pooled connection: %v (a connection kept by a sale would block this)", err)
	}
	return in != 0
}

// Every way a one-line sale can end before its COMMIT gives its connection back with no
// transaction open, on a pool of one connection: a leaked connection would block the next call,
// and a pooled one with the sale's transaction open would run the next caller's statements
// inside it.
func TestPipelinedSaleEndsItsTransactionOnEveryPath(t *testing.T) {
	ctx := context.Background()
	s := onePoolStore(t, "PIPE-1", 2)
	if _, err := s.Deduct(ctx, Purchase{SKU: "PIPE-1", Qty: 1, Token: 50, RequestID: "pipe-first"}, Fenced, Hooks{}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	for _, c := range []struct {
		name  string
		p     Purchase
		mode  Mode
		hooks Hooks
		want  func(error) bool
	}{
		{"stale token", Purchase{SKU: "PIPE-1", Qty: 1, Token: 49}, Fenced, Hooks{}, func(err error) bool { return errors.Is(err, ErrStaleToken) }},
		{"unknown SKU", Purchase{SKU: "PIPE-NONE", Qty: 1, Token: 51}, Fenced, Hooks{}, func(err error) bool { return errors.Is(err, ErrUnknownSKU) }},
		{"short", Purchase{SKU: "PIPE-1", Qty: 5, Token: 51}, Fenced, Hooks{}, func(err error) bool { return errors.Is(err, ErrOutOfStock) }},
		{"work fails", Purchase{SKU: "PIPE-1", Qty: 1, Token: 51}, Unfenced, Hooks{Work: func(context.Context) error { return boom }}, func(err error) bool { return errors.Is(err, boom) }},
		{"lock lost before commit", Purchase{SKU: "PIPE-1", Qty: 1, Token: 51, RequestID: "pipe-lost"}, Fenced, Hooks{BeforeCommit: func() error { return boom }}, func(err error) bool { return errors.Is(err, boom) }},
		{"work panics", Purchase{SKU: "PIPE-1", Qty: 1}, Unsafe, Hooks{Work: func(context.Context) error { panic("work panicked") }}, func(err error) bool { return strings.Contains(err.Error(), "work panicked") }},
		{"replay", Purchase{SKU: "PIPE-1", Qty: 1, Token: 52, RequestID: "pipe-first"}, Fenced, Hooks{}, func(err error) bool { return err == nil }},
		{"key reused", Purchase{SKU: "PIPE-1", Qty: 2, Token: 52, RequestID: "pipe-first"}, Fenced, Hooks{}, func(err error) bool { return errors.Is(err, ErrKeyReused) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = errors.New(r.(string))
					}
				}()
				_, err = s.Deduct(cctx, c.p, c.mode, c.hooks)
				return err
			}()
			if !c.want(err) {
				t.Fatalf("Deduct: %v", err)
			}
			if inTransaction(t, cctx, s) {
				t.Fatal("the pooled connection is still inside the sale's transaction")
			}
			if p, err := s.Product(cctx, "PIPE-1"); err != nil || p.Stock != 1 || p.FenceToken != 50 {
				t.Fatalf("product %+v, %v: want the first sale's stock 1 and fence 50, nothing else applied", p, err)
			}
		})
	}
	if _, err := s.Deduct(ctx, Purchase{SKU: "PIPE-1", Qty: 1, Token: 53, RequestID: "pipe-last"}, Fenced, Hooks{}); err != nil {
		t.Fatalf("a sale after all that: %v", err)
	}
	if a, err := s.Audit(ctx, "PIPE-1"); err != nil || a.Stock != 0 || a.Orders != 2 || a.LostUpdates != 0 {
		t.Fatalf("audit %+v, %v", a, err)
	}
}

// The writes' round trip (the stock's UPDATE and the order's INSERT) carries no COMMIT: when its
// answer is lost after the server acted, nothing can have been sold, and the sale says so
// (an ordinary error, not ErrOutcomeUnknown). The server rolls the transaction back when the
// connection goes, and the key resolves to no order.
func TestPipelinedWritesWithoutAnswerSellNothing(t *testing.T) {
	proxied, direct, proxy := throughBlackHole(t)
	ctx := context.Background()
	proxy.CutAfterQuery(func(q string) bool { return strings.Contains(q, "INSERT INTO orders") }, false)
	_, err := proxied.Deduct(ctx, Purchase{SKU: "BH-1", Qty: 1, RequestID: "pipe-cut", Token: 7}, Fenced, Hooks{})
	if err == nil || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Deduct with the writes' answer lost: %v, want an error that is not ErrOutcomeUnknown", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if o, found, err := direct.ResolveRequest(rctx, "pipe-cut"); err != nil || found {
		t.Fatalf("the key resolves to %+v, %v, %v: want no order", o, found, err)
	}
	if a, err := direct.Audit(ctx, "BH-1"); err != nil || a.Stock != 10 || a.Orders != 0 {
		t.Fatalf("audit %+v, %v: want nothing sold", a, err)
	}
}

// onePoolStore is a store on a fresh database with a pool of one connection, and sku stocked.
func onePoolStore(t *testing.T, sku string, stock int64) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, testenv.MySQLDatabase(t), PoolOptions{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reset(ctx, sku, stock); err != nil {
		t.Fatal(err)
	}
	return s
}
