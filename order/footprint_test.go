package order_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/loadtest"
	"github.com/zkstock/zkstock/order"
)

// footprint is what a load leaves behind: in ZooKeeper (lock paths and watches of the load's SKUs)
// and in this process, where the three replicas run (goroutines, live heap, SKU batchers).
type footprint struct {
	lockPaths, watches, goroutines, batchers int
	liveHeapMB                               float64
}

func (f footprint) String() string {
	return fmt.Sprintf("%d lock paths and %d watches of the load's SKUs in ZooKeeper; %d goroutines, %.1f MB live heap, %d batchers",
		f.lockPaths, f.watches, f.goroutines, f.liveHeapMB, f.batchers)
}

func measure(t *testing.T, conn *zk.Conn, zkAddr, prefix string, rs []*replica) footprint {
	t.Helper()
	kids, _, err := conn.Children(order.LockRoot)
	if err != nil && err != zk.ErrNoNode {
		t.Fatal(err)
	}
	var f footprint
	for _, k := range kids {
		if strings.HasPrefix(k, prefix) {
			f.lockPaths++
		}
	}
	f.watches = testenv.WatchesUnder(t, zkAddr, order.LockRoot+"/"+prefix)
	// The bytes the collection just marked, not the heap's spans in use: those also count the
	// free room in partly used spans, which a load of many small allocations leaves behind and
	// which says nothing about what the replicas keep.
	f.goroutines, f.liveHeapMB = runtime.NumGoroutine(), float64(order.LiveHeapBytes())/(1<<20)
	for _, r := range rs {
		f.batchers += r.Srv.Batchers()
	}
	return f
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// Purchases over a catalogue in modes zk and zk-batch leave nothing behind: the SKUs' lock paths
// are reaped (container nodes), no watch stays open, the batchers go, and the replicas' goroutines
// and live heap come back to where they were. make footprint runs it at 100,000 purchases over 1,000
// SKUs (FOOTPRINT_PURCHASES, FOOTPRINT_SKUS); make test at a smaller size.
func TestFootprintIsFlat(t *testing.T) {
	purchases, skus := envInt("FOOTPRINT_PURCHASES", 3000), envInt("FOOTPRINT_SKUS", 200)
	zkAddr := testenv.ZKServers(t)[0]
	conn, _, err := zk.Connect([]string{zkAddr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rs := ordertest.Start(t, 3, ordertest.Options{})
	urls := []string{rs[0].URL, rs[1].URL, rs[2].URL}
	prefix := "FOOT-" + strings.ToUpper(strconv.FormatInt(time.Now().UnixNano()%1e6, 36))
	load := func(n, skus int, modes ...string) []loadtest.Row {
		rep, err := loadtest.Run(context.Background(), loadtest.Config{Targets: urls, SKU: prefix, Products: skus, Dist: loadtest.DistUniform,
			Stock: 2*n/skus + 2, Requests: n, Concurrency: 48, Qty: 1, Modes: modes, AdminToken: ordertest.AdminToken, Timeout: time.Minute}, quietProgress{})
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.Check(); err != nil {
			t.Fatal(err)
		}
		return rep.Rows
	}
	settled := func(base footprint) footprint {
		var f footprint
		deadline := time.Now().Add(30 * time.Second)
		for {
			f = measure(t, conn, zkAddr, prefix, rs)
			if f.lockPaths == 0 && f.watches == 0 && f.batchers == 0 && f.goroutines <= base.goroutines+10 {
				return f
			}
			if time.Now().After(deadline) {
				t.Fatalf("not back to idle after 30 s: %v (before: %v)", f, base)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	load(300, 30, "zk", "zk-batch") // everything that starts on first use has started
	before := settled(measure(t, conn, zkAddr, prefix, rs))
	start := time.Now()
	rows := load(purchases, skus, "zk", "zk-batch")
	// Logged now, so that the load's report (the test's, not the replicas') is not counted after.
	t.Logf("%d purchases over %d SKUs, in zk (%.0f/s) and zk-batch (%.0f/s), %v in all", purchases, skus, rows[0].Throughput, rows[1].Throughput, time.Since(start).Round(time.Second))
	peak := measure(t, conn, zkAddr, prefix, rs)
	after := settled(before)
	t.Logf("before: %v", before)
	t.Logf("at the end of the load: %v", peak)
	t.Logf("after: %v", after)
	if after.liveHeapMB > before.liveHeapMB+32 {
		t.Fatalf("the live heap grew from %.1f to %.1f MB", before.liveHeapMB, after.liveHeapMB)
	}
}
