package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// A peer of the writer killed under writes, the writer's pool full of purchases that wait while
// the cluster evicts the peer (every write blocks for evs.suspect_timeout): the writer answers its
// checks all along, on a connection of their own, so it stays the writer, and the purchases go on
// there once the cluster has re-formed.
func TestGaleraClusterKeepsItsWriterWhenAPeerDies(t *testing.T) {
	nodes := testenv.GaleraDatabase(t)
	openStoreAt(t, nodes[0]) // migrates
	ctx := context.Background()
	var moves atomic.Int64
	c, err := inventory.OpenCluster(ctx, nodes, inventory.PoolOptions{MaxOpen: 4}, inventory.ClusterOptions{
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: time.Second,
		OnMove: func(from, to int) { moves.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	writer := c.Writer()
	peer := fmt.Sprint((writer+1)%len(nodes) + 1) // its number, 1 to 3
	const stock = 1_000_000
	ps := make([]*purchaser, 8) // twice the pool: every connection busy
	for i := range ps {
		ps[i] = &purchaser{sku: fmt.Sprintf("K-%d", i)}
		mustReset(t, c.Store(), ps[i].sku, stock)
	}
	runCtx, stop := context.WithCancel(ctx)
	var faultAt atomic.Int64
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.run(runCtx, t, c, &faultAt) }()
	}
	time.Sleep(time.Second)
	faultAt.Store(time.Now().UnixNano())
	testenv.GaleraControl(t, "kill", peer)
	defer func() { t.Logf("restart: %s", testenv.GaleraControl(t, "restart", peer)) }()
	deadline := time.Now().Add(failoverLimit + 5*time.Second)
	for time.Now().Before(deadline) {
		done := true
		for _, p := range ps {
			done = done && p.okAfter.Load() >= 20
		}
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if n := moves.Load(); n != 0 || c.Writer() != writer {
		t.Errorf("the writer moved %d times (now node %d, was %d) when only a peer died", n, c.Writer()+1, writer+1)
	}
	for _, p := range ps {
		stall, _ := p.longestStall()
		t.Logf("%s: %d sold after the kill, no sale for %.1f s at most", p.sku, p.okAfter.Load(), stall.Seconds())
		if p.okAfter.Load() < 20 {
			t.Errorf("%s sold %d after the peer died, want sales to go on", p.sku, p.okAfter.Load())
		}
	}
}
