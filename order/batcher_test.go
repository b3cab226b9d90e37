package order_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// A panic in a batch fails that batch's purchases (nothing sold, and they are told so once the
// database confirms it), not the replica: the next purchases sell.
func TestBatchPanicFailsOnlyItsBatch(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{Mode: order.ModeZKBatch})[0]
	resetStock(t, r, "BAT-1", 10)
	var panics atomic.Int32
	r.Srv.SetBatchPanic(func() {
		if panics.Add(1) == 1 {
			panic("injected")
		}
	})
	if rep := buy(t, r, "BAT-1", 1, "bat-1"); rep.status != 503 || rep.code() != "storage_unavailable" {
		t.Fatalf("the panicked batch's purchase: %d %s", rep.status, rep.raw)
	}
	if rep := buy(t, r, "BAT-1", 1, "bat-2"); rep.status != 201 {
		t.Fatalf("after the panic: %d %s", rep.status, rep.raw)
	}
	if a := auditOf(t, r, "BAT-1"); a.Orders != 1 || a.Stock != 9 {
		t.Fatalf("audit %+v", a)
	}
}

// A lock attempt that times out fails the purchases that waited through it, not one that arrived
// just before it gave up: that one gets an attempt, and a LOCK_TIMEOUT, of its own.
func TestBatchLockTimeoutFailsOnlyThoseWhoWaited(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{Mode: order.ModeZKBatch, LockTimeout: time.Second})[0]
	resetStock(t, r, "BAT-2", 10)
	other, err := dlock.Connect(context.Background(), testenv.ZKServers(t), dlock.WithDigest(testenv.ZKAuth()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	held, err := dlock.NewMutex(other, "/zkstock/locks/sku/BAT-2").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var early, late reply
	wg.Add(2)
	go func() { defer wg.Done(); early = buy(t, r, "BAT-2", 1, "early") }()
	time.Sleep(800 * time.Millisecond)
	go func() { defer wg.Done(); late = buy(t, r, "BAT-2", 1, "late") }()
	time.Sleep(700 * time.Millisecond) // the first attempt gave up at 1 s
	if err := held.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if early.status != 503 || early.code() != "lock_unavailable" {
		t.Fatalf("the purchase that waited 1 s: %d %s", early.status, early.raw)
	}
	if late.status != 201 {
		t.Fatalf("the purchase that came 0.2 s before the first attempt gave up: %d %s", late.status, late.raw)
	}
}

// Shutdown waits for a batch that is selling, and a SKU's batcher goes when it is idle.
func TestBatchShutdownWaitsAndIdleBatchersGo(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{Mode: order.ModeZKBatch, WorkDelay: 500 * time.Millisecond})[0]
	for i := 0; i < 20; i++ {
		resetStock(t, r, fmt.Sprintf("BAT-3-%d", i), 5)
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); buy(t, r, fmt.Sprintf("BAT-3-%d", i), 1, "") }(i)
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for r.Srv.Batchers() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d batchers left for 20 idle SKUs", r.Srv.Batchers())
		}
		time.Sleep(20 * time.Millisecond)
	}

	go buy(t, r, "BAT-3-0", 1, "at-shutdown")
	for r.Srv.Batchers() == 0 { // the purchase reached its batcher, which works for 0.5 s
		time.Sleep(5 * time.Millisecond)
	}
	r.Srv.Close()
	if a := auditOf(t, r, "BAT-3-0"); a.Orders != 2 {
		t.Fatalf("Close returned before the batch that was selling had finished: %+v", a)
	}
}
