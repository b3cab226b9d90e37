package order_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

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
func BenchmarkPurchase(b *testing.B) {
	for _, mode := range []order.LockMode{order.ModeZK, order.ModeNone} {
		b.Run(string(mode), func(b *testing.B) {
			r := ordertest.Start(b, 1, ordertest.Options{Mode: mode})[0]
			resetStock(b, r, "BENCH-1", 1_000_000_000)
			h := r.Srv.Handler()
			const body = `{"sku":"BENCH-1","qty":1}`
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusCreated {
					b.Fatalf("purchase: %d %s", w.Code, w.Body)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time this process has used, user and system, in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
