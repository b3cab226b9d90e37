package inventory_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// A lock's holder never waits for a connection behind the key holds: with a pool of 4 (1 kept
// for the turns), eight key holds stuck behind a row lock take 3 connections at most, and a
// deduction still runs at once. Before, the holds took all 4, and the deduction
// waited for one until its deadline (on the compose stack: a flash sale's buyers' key holds, and
// every turn of the lock waiting behind them).
func TestTheTurnsKeepAConnectionFromTheKeyHolds(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	ctx := context.Background()
	s, err := inventory.Open(ctx, dsn, inventory.PoolOptions{MaxOpen: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	mustReset(t, s, "DOOR-1", 10)
	if held, _, err := s.HoldKey(ctx, "door-k", "a0", "r1", time.Minute, "door-k"); err != nil || !held {
		t.Fatalf("hold: %v %v", held, err)
	}
	// Another client locks the holding's row: every hold of the key waits for it.
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	blocker, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec("SELECT * FROM key_attempts WHERE request_id = 'door-k' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var holds sync.WaitGroup
	for i := range 8 {
		holds.Go(func() { _, _, _ = s.HoldKey(hctx, "door-k", "a"+string(rune('1'+i)), "r1", time.Minute, "door-k") })
	}
	for deadline := time.Now().Add(5 * time.Second); s.PoolStats().InUse < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pool %+v: want the holds waiting on the row lock", s.PoolStats())
		}
	}
	time.Sleep(100 * time.Millisecond) // would the others take the last connection?
	if inUse := s.PoolStats().InUse; inUse != 3 {
		t.Errorf("%d of the pool's 4 connections in use by the stuck holds, want 3", inUse)
	}
	dctx, dcancel := context.WithTimeout(ctx, 3*time.Second)
	defer dcancel()
	res, err := s.Deduct(dctx, inventory.Purchase{SKU: "DOOR-1", Qty: 1, RequestID: "door-sale"}, inventory.Unfenced, inventory.Hooks{})
	if err != nil || res.Remaining != 9 {
		t.Errorf("a turn's deduction beside the stuck holds: %+v, %v; want 9 left", res, err)
	}
	// A hold that finds the door full until its context ends sent nothing: ErrPoolBusy.
	bctx, bcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer bcancel()
	if _, _, err := s.HoldKey(bctx, "door-other", "b1", "r1", time.Minute); !errors.Is(err, inventory.ErrPoolBusy) {
		t.Errorf("a hold at a full door: %v, want ErrPoolBusy", err)
	}
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	holds.Wait()
}
