package faults

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/loadtest"
)

// rssKiB reads a process's resident memory.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// Scenario 7: 5,000 purchases at concurrency 200 across 3 replicas, stock 4,000.
func TestSustainedLoad(t *testing.T) { inEachMode(t, testSustainedLoad) }

func testSustainedLoad(t *testing.T, mode string) {
	dsn := testenv.MySQLDatabase(t)
	rs := startReplicas(t, 3, dsn, testenv.ZKEnsemble(t), "ZK_SESSION_TIMEOUT=6s", "LOCK_TIMEOUT=30s")
	var targets []string
	for _, r := range rs {
		targets = append(targets, r.url)
	}

	// Sample the replicas' memory while the load runs: often, as zk-batch sells the 5,000 in
	// about 2 s (at 250 ms it once drew only 7 samples).
	var mu sync.Mutex
	var samples [][]int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				row := make([]int64, len(rs))
				for i, r := range rs {
					row[i] = rssKiB(r.cmd.Process.Pid)
				}
				mu.Lock()
				samples = append(samples, row)
				mu.Unlock()
			}
		}
	}()
	rep, err := loadtest.Run(context.Background(), loadtest.Config{Targets: targets, SKU: "F-SUSTAIN", Stock: 4000, Requests: 5000,
		Concurrency: 200, Qty: 1, Modes: []string{mode}, AdminToken: "faults", Timeout: time.Minute}, loadtest.NoProgress{})
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	row := rep.Rows[0]
	t.Logf("%+v", struct {
		Accepted, SoldOut, Errors         int
		Throughput, P50, P99              float64
		FinalStock, Oversold, LostUpdates int64
		FalseRefusals                     string
	}{row.Accepted, row.SoldOut, row.Errors, row.Throughput, row.P50, row.P99, row.FinalStock, row.Oversold, row.LostUpdates, loadtest.Count(row.FalseRefusals)})
	// Every unit sold, once; the buyers past the stock are answered out_of_stock, none refused.
	if row.Accepted != 4000 || row.SoldOut != 1000 || row.Errors != 0 || row.FinalStock != 0 || row.Oversold != 0 || row.LostUpdates != 0 || row.Undersold != 0 {
		t.Fatalf("sustained load: %d accepted, %d sold out, %d errors %v, final stock %d, oversold %d, lost %d",
			row.Accepted, row.SoldOut, row.Errors, row.ErrorCodes, row.FinalStock, row.Oversold, row.LostUpdates)
	}
	if row.FalseRefusals == nil {
		t.Fatal("the load generator could not read the replicas' zkstock_false_refusals_total")
	}
	checkTokensGrow(t, dsn, "F-SUSTAIN", mode)

	// Memory stays flat: the peak of the second half of the run is within half again of the
	// first half's, per replica.
	mu.Lock()
	defer mu.Unlock()
	if len(samples) < 8 {
		t.Fatalf("only %d memory samples", len(samples))
	}
	half := len(samples) / 2
	var growth []string
	for i := range rs {
		var first, second int64
		for j, s := range samples {
			if j < half {
				first = max(first, s[i])
			} else {
				second = max(second, s[i])
			}
		}
		growth = append(growth, fmt.Sprintf("%s %d→%d MiB", rs[i].name, first/1024, second/1024))
		if second > first*3/2 {
			t.Errorf("%s memory grew from %d KiB to %d KiB during the run", rs[i].name, first, second)
		}
	}
	t.Logf("peak RSS first half → second half: %s", strings.Join(growth, ", "))
	record(reliabilityRow{"7. sustained load (" + mode + ")", "5,000 purchases, 200 in flight, 3 replicas, stock 4,000",
		fmt.Sprintf("4,000 × 201 and 1,000 × 409, no other answer; %.0f req/s, p50 %.0f ms, p99 %.0f ms; peak RSS %s", row.Throughput, row.P50, row.P99, strings.Join(growth, ", ")),
		"none", fmt.Sprintf("sold %d of 4000, stock %d, oversold %d, lost updates %d", row.UnitsSold, row.FinalStock, row.Oversold, row.LostUpdates)})
}
