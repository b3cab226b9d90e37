package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

func TestMain(m *testing.M) { testenv.Main(m, "MYSQL_DSN") }

func openStore(t *testing.T) *inventory.Store {
	t.Helper()
	return openStoreAt(t, testenv.MySQLDatabase(t))
}

// openStoreAt opens a store on dsn (a test's database, perhaps through a proxy) and migrates it.
func openStoreAt(t *testing.T, dsn string) *inventory.Store {
	t.Helper()
	ctx := context.Background()
	s, err := inventory.Open(ctx, dsn, inventory.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func mustReset(t *testing.T, s *inventory.Store, sku string, stock int64) {
	t.Helper()
	if _, err := s.Reset(context.Background(), sku, stock); err != nil {
		t.Fatal(err)
	}
}

func audit(t *testing.T, s *inventory.Store, sku string) inventory.Audit {
	t.Helper()
	a, err := s.Audit(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestDeductAndAudit(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	mustReset(t, s, "SKU-1", 5)
	for _, mode := range []inventory.Mode{inventory.Fenced, inventory.Unfenced, inventory.Unsafe} {
		res, err := s.Deduct(ctx, inventory.Purchase{SKU: "SKU-1", Qty: 2, Replica: "r1", Token: 10}, mode, inventory.Hooks{})
		if mode == inventory.Unsafe {
			if !errors.Is(err, inventory.ErrOutOfStock) {
				t.Fatalf("third deduction of 2 from 1: %v, want ErrOutOfStock", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		if res.Order.ID == 0 || res.Order.Replica != "r1" || res.Order.FenceToken != 10 || res.Replayed {
			t.Fatalf("%v: result %+v", mode, res)
		}
	}
	a := audit(t, s, "SKU-1")
	want := inventory.Audit{SKU: "SKU-1", InitialStock: 5, Stock: 1, Orders: 2, UnitsSold: 4}
	if a != want {
		t.Fatalf("audit %+v, want %+v", a, want)
	}
	// Reset deletes the orders and restores the stock.
	mustReset(t, s, "SKU-1", 7)
	if a := audit(t, s, "SKU-1"); a.Stock != 7 || a.InitialStock != 7 || a.Orders != 0 {
		t.Fatalf("after reset %+v", a)
	}
}

func TestUnknownSKU(t *testing.T) {
	s := openStore(t)
	for _, mode := range []inventory.Mode{inventory.Fenced, inventory.Unfenced, inventory.Unsafe} {
		_, err := s.Deduct(context.Background(), inventory.Purchase{SKU: "NOPE", Qty: 1, Token: 1}, mode, inventory.Hooks{})
		if !errors.Is(err, inventory.ErrUnknownSKU) {
			t.Fatalf("%v: %v, want ErrUnknownSKU", mode, err)
		}
	}
	if _, err := s.Audit(context.Background(), "NOPE"); !errors.Is(err, inventory.ErrUnknownSKU) {
		t.Fatalf("audit: %v", err)
	}
}

func TestStaleTokenIsRejected(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	mustReset(t, s, "SKU-F", 10)
	if _, err := s.Deduct(ctx, inventory.Purchase{SKU: "SKU-F", Qty: 1, Token: 100}, inventory.Fenced, inventory.Hooks{}); err != nil {
		t.Fatal(err)
	}
	before := audit(t, s, "SKU-F")
	worked := false
	_, err := s.Deduct(ctx, inventory.Purchase{SKU: "SKU-F", Qty: 1, Token: 99, RequestID: "stale-1"}, inventory.Fenced,
		inventory.Hooks{Work: func(context.Context) error { worked = true; return nil }})
	if !errors.Is(err, inventory.ErrStaleToken) {
		t.Fatalf("token 99 after 100: %v, want ErrStaleToken", err)
	}
	if worked {
		t.Fatal("the stale holder's work ran: the fence must be claimed first")
	}
	if after := audit(t, s, "SKU-F"); after != before {
		t.Fatalf("stale deduction changed the tables: %+v -> %+v", before, after)
	}
	if _, found, _ := s.OrderByRequestID(ctx, "stale-1"); found {
		t.Fatal("stale deduction recorded an order")
	}
	// The same token again is the same holder: allowed.
	if _, err := s.Deduct(ctx, inventory.Purchase{SKU: "SKU-F", Qty: 1, Token: 100}, inventory.Fenced, inventory.Hooks{}); err != nil {
		t.Fatalf("same token again: %v", err)
	}
	p, _ := s.Product(ctx, "SKU-F")
	if p.FenceToken != 100 || p.Stock != 8 {
		t.Fatalf("product %+v", p)
	}
}

func TestRejectedPurchasesChangeNothing(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	mustReset(t, s, "SKU-R", 3)
	before := audit(t, s, "SKU-R")
	boom := errors.New("boom")
	cases := map[string]struct {
		p     inventory.Purchase
		hooks inventory.Hooks
		want  error
	}{
		"out of stock":        {inventory.Purchase{SKU: "SKU-R", Qty: 4, Token: 1}, inventory.Hooks{}, inventory.ErrOutOfStock},
		"work fails":          {inventory.Purchase{SKU: "SKU-R", Qty: 1, Token: 1}, inventory.Hooks{Work: func(context.Context) error { return boom }}, boom},
		"lock lost at commit": {inventory.Purchase{SKU: "SKU-R", Qty: 1, Token: 1, RequestID: "k-lost"}, inventory.Hooks{BeforeCommit: func() error { return boom }}, boom},
	}
	for name, c := range cases {
		if _, err := s.Deduct(ctx, c.p, inventory.Fenced, c.hooks); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	after := audit(t, s, "SKU-R")
	after.SKU, before.SKU = "", ""
	if after != before {
		t.Fatalf("rejected purchases changed the tables: %+v -> %+v", before, after)
	}
	if p, _ := s.Product(ctx, "SKU-R"); p.FenceToken != 0 {
		t.Fatalf("a rolled-back deduction kept its fence claim: %d", p.FenceToken)
	}
}

func TestIdempotencyKey(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	mustReset(t, s, "SKU-I", 10)
	mustReset(t, s, "SKU-J", 10)
	p := inventory.Purchase{SKU: "SKU-I", Qty: 2, RequestID: "key-1", Replica: "r1", Token: 5}
	first, err := s.Deduct(ctx, p, inventory.Fenced, inventory.Hooks{})
	if err != nil || first.Replayed {
		t.Fatalf("first: %+v %v", first, err)
	}
	p.Replica = "r2"
	second, err := s.Deduct(ctx, p, inventory.Unsafe, inventory.Hooks{})
	if err != nil || !second.Replayed || second.Order.ID != first.Order.ID || second.Remaining != 8 {
		t.Fatalf("replay: %+v %v", second, err)
	}
	if _, err := s.Deduct(ctx, inventory.Purchase{SKU: "SKU-I", Qty: 3, RequestID: "key-1"}, inventory.Unsafe, inventory.Hooks{}); !errors.Is(err, inventory.ErrKeyReused) {
		t.Fatalf("same key, other qty: %v", err)
	}
	if _, err := s.Deduct(ctx, inventory.Purchase{SKU: "SKU-J", Qty: 2, RequestID: "key-1"}, inventory.Unsafe, inventory.Hooks{}); !errors.Is(err, inventory.ErrKeyReused) {
		t.Fatalf("same key, other SKU: %v", err)
	}
	if a := audit(t, s, "SKU-I"); a.Orders != 1 || a.Stock != 8 {
		t.Fatalf("audit %+v", a)
	}
	if a := audit(t, s, "SKU-J"); a.Orders != 0 || a.Stock != 10 {
		t.Fatalf("audit %+v", a)
	}
}

// Without a lock, the same key sent many times at once still makes one order: the unique index
// turns the losers into replays.
func TestIdempotencyKeyUnderConcurrencyWithoutLock(t *testing.T) {
	s := openStore(t)
	mustReset(t, s, "SKU-K", 100)
	var wg sync.WaitGroup
	ids := make(chan int64, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Deduct(context.Background(), inventory.Purchase{SKU: "SKU-K", Qty: 1, RequestID: "same"}, inventory.Unsafe, inventory.Hooks{
				Work: func(context.Context) error { time.Sleep(5 * time.Millisecond); return nil },
			})
			if err != nil {
				t.Errorf("deduct: %v", err)
				return
			}
			ids <- r.Order.ID
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		seen[id] = true
	}
	if len(seen) != 1 {
		t.Fatalf("answers carry %d different orders, want 1", len(seen))
	}
	if a := audit(t, s, "SKU-K"); a.Orders != 1 || a.Stock != 99 {
		t.Fatalf("audit %+v: want one order and one deduction", a)
	}
}

// The unsafe path is a plain read-modify-write: concurrent buyers read the same stock and sell
// more than exists. If this stops reproducing, the demonstration is broken.
func TestUnsafeDeductionOversells(t *testing.T) {
	s := openStore(t)
	mustReset(t, s, "SKU-U", 20)
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := s.Deduct(context.Background(), inventory.Purchase{SKU: "SKU-U", Qty: 1, Replica: fmt.Sprint(i % 3)}, inventory.Unsafe, inventory.Hooks{
				Work: func(context.Context) error { time.Sleep(5 * time.Millisecond); return nil },
			})
			if err != nil && !errors.Is(err, inventory.ErrOutOfStock) {
				t.Errorf("deduct: %v", err)
			}
		}(i)
	}
	wg.Wait()
	a := audit(t, s, "SKU-U")
	if a.Oversold == 0 && a.LostUpdates == 0 {
		t.Fatalf("no oversell and no lost update without a lock: %+v", a)
	}
	t.Logf("unsafe: %+v", a)
}

// Replicas start together on a fresh database: their migrations must not trip over each other.
func TestConcurrentMigrate(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := inventory.Open(context.Background(), dsn, inventory.PoolOptions{MaxOpen: 2})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			errs <- s.Migrate(context.Background())
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	s, err := inventory.Open(context.Background(), dsn, inventory.PoolOptions{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Reset(context.Background(), "SKU-M", 1); err != nil {
		t.Fatalf("the tables are not there after migrating: %v", err)
	}
}

// The database strategies need no outside lock: 60 concurrent buyers of 20 units sell exactly 20.
func TestDatabaseStrategiesAreExact(t *testing.T) {
	s := openStore(t)
	for _, mode := range []inventory.Mode{inventory.ForUpdate, inventory.CAS} {
		t.Run(mode.String(), func(t *testing.T) {
			sku := "SKU-" + mode.String()
			mustReset(t, s, sku, 20)
			var wg sync.WaitGroup
			for i := 0; i < 60; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := s.Deduct(context.Background(), inventory.Purchase{SKU: sku, Qty: 1}, mode, inventory.Hooks{
						Work: func(context.Context) error { time.Sleep(2 * time.Millisecond); return nil },
					})
					if err != nil && !errors.Is(err, inventory.ErrOutOfStock) {
						t.Errorf("deduct: %v", err)
					}
				}()
			}
			wg.Wait()
			if a := audit(t, s, sku); a.Orders != 20 || a.Stock != 0 || a.Oversold != 0 || a.LostUpdates != 0 {
				t.Fatalf("audit %+v", a)
			}
			if _, err := s.Deduct(context.Background(), inventory.Purchase{SKU: "NOPE", Qty: 1}, mode, inventory.Hooks{}); !errors.Is(err, inventory.ErrUnknownSKU) {
				t.Fatalf("unknown SKU: %v", err)
			}
		})
	}
}

func TestTableLock(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	first, err := s.AcquireTableLock(ctx, "sku:T", time.Hour, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.AcquireTableLock(short, "sku:T", time.Hour, time.Millisecond); !errors.Is(err, inventory.ErrLockTimeout) {
		t.Fatalf("second holder: %v, want ErrLockTimeout", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A holder that crashed (never released) blocks others for its TTL only.
	if _, err := s.AcquireTableLock(ctx, "sku:T", 200*time.Millisecond, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	taker, err := s.AcquireTableLock(ctx, "sku:T", time.Hour, 5*time.Millisecond)
	if err != nil {
		t.Fatalf("taking over an expired lock: %v", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("took %v to take over a lock with a 200 ms TTL", waited)
	}
	short2, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	if _, err := s.AcquireTableLock(short2, "sku:T", time.Hour, time.Millisecond); !errors.Is(err, inventory.ErrLockTimeout) {
		t.Fatalf("lock free while the taker holds it: %v", err)
	}
	if err := taker.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDeductBatch(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	mustReset(t, s, "SKU-B", 5)
	mk := func(qty int64, key string) inventory.BatchItem {
		return inventory.BatchItem{Purchase: inventory.Purchase{SKU: "SKU-B", Qty: qty, RequestID: key, Replica: "r1"}}
	}
	items := []inventory.BatchItem{mk(2, "a"), mk(2, "a"), mk(2, ""), mk(2, ""), mk(1, "b"), mk(3, "a")}
	if err := s.DeductBatch(ctx, "SKU-B", inventory.Fence{Token: 7}, items, nil); err != nil {
		t.Fatal(err)
	}
	// a: sold; a again: the same order replayed; 2: sold; 2: out of stock (1 left); b: sold; a with
	// another quantity: key reused.
	if items[0].Err != nil || items[0].Result.Replayed || items[0].Result.Remaining != 3 {
		t.Fatalf("item 0: %+v", items[0])
	}
	if !items[1].Result.Replayed || items[1].Result.Order.ID != items[0].Result.Order.ID {
		t.Fatalf("item 1 should replay item 0: %+v", items[1])
	}
	if items[2].Err != nil || items[2].Result.Remaining != 1 {
		t.Fatalf("item 2: %+v", items[2])
	}
	if !errors.Is(items[3].Err, inventory.ErrOutOfStock) {
		t.Fatalf("item 3: %+v", items[3])
	}
	if items[4].Err != nil || items[4].Result.Remaining != 0 || items[4].Result.Order.FenceToken != 7 {
		t.Fatalf("item 4: %+v", items[4])
	}
	if !errors.Is(items[5].Err, inventory.ErrKeyReused) {
		t.Fatalf("item 5: %+v", items[5])
	}
	if a := audit(t, s, "SKU-B"); a.Orders != 3 || a.Stock != 0 || a.UnitsSold != 5 || a.LostUpdates != 0 {
		t.Fatalf("audit %+v", a)
	}
	// The orders the items answer with are the rows the one insert wrote, ids and all.
	rows, err := s.Orders(ctx, "SKU-B")
	if err != nil {
		t.Fatal(err)
	}
	for k, i := range []int{0, 2, 4} {
		got, want := items[i].Result.Order, rows[k]
		if got.ID != want.ID || got.Qty != want.Qty || (got.RequestID == nil) != (want.RequestID == nil) {
			t.Fatalf("item %d answered with order %+v, the table holds %+v", i, got, want)
		}
	}
	// A key recorded by an earlier batch is replayed, not sold again.
	again := []inventory.BatchItem{mk(1, "b")}
	if err := s.DeductBatch(ctx, "SKU-B", inventory.Fence{Token: 7}, again, nil); err != nil {
		t.Fatal(err)
	}
	if !again[0].Result.Replayed || again[0].Result.Order.ID != items[4].Result.Order.ID {
		t.Fatalf("a key of an earlier batch: %+v, want a replay of order %d", again[0], items[4].Result.Order.ID)
	}
	// A stale token or a failing last check changes nothing.
	mustReset(t, s, "SKU-B", 5)
	before := audit(t, s, "SKU-B")
	if err := s.DeductBatch(ctx, "SKU-B", inventory.Fence{Token: 6}, []inventory.BatchItem{mk(1, "")}, nil); !errors.Is(err, inventory.ErrStaleToken) {
		t.Fatalf("stale batch: %v", err)
	}
	boom := errors.New("lease lost")
	if err := s.DeductBatch(ctx, "SKU-B", inventory.Fence{Token: 8}, []inventory.BatchItem{mk(1, ""), mk(1, "")}, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("batch with a failing last check: %v", err)
	}
	if after := audit(t, s, "SKU-B"); after != before {
		t.Fatalf("failed batches changed the tables: %+v -> %+v", before, after)
	}
}
