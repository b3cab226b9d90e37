package order_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/order"
)

// BenchmarkPurchase is one purchase through the HTTP handler, against the real ZooKeeper and
// MariaDB (scripts/servers.sh): the service's CPU and allocations per purchase, its answer 201.
// The request goes to the handler in process (no socket), so that what is measured is the
// service's own work and its round trips to the servers. ns/op is the purchase's latency, mostly
// the servers' round trips; cpu-ns/op is this process's CPU time (user and system) per purchase,
// the servers' own excluded:
//
//	scripts/servers.sh run -- go test -run '^$' -bench Purchase -benchmem ./order
//
// key=client sends an Idempotency-Key of the client's, new each time, which the service holds
// across the fleet for the purchase (sale.Engine.HoldKey); key=none lets the service make one,
// which nobody can retry and so is not held: side by side, what holding a key costs.
func BenchmarkPurchase(b *testing.B) {
	for _, mode := range []order.LockMode{order.ModeZK, order.ModeNone} {
		for _, clientKey := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/key=%s", mode, map[bool]string{false: "none", true: "client"}[clientKey]), func(b *testing.B) {
				benchmarkPurchase(b, mode, clientKey)
			})
		}
	}
}

func benchmarkPurchase(b *testing.B, mode order.LockMode, clientKey bool) {
	r := ordertest.Start(b, 1, ordertest.Options{Mode: mode})[0]
	resetStock(b, r, "BENCH-1", 1_000_000_000)
	h := r.Srv.Handler()
	const body = `{"sku":"BENCH-1","qty":1}`
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	i := 0
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if clientKey {
			i++
			req.Header.Set("Idempotency-Key", run+"-"+strconv.Itoa(i))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			b.Fatalf("purchase: %d %s", w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process has used, user and system, in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
