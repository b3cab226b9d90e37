package loadtest_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/loadtest"
)

// A run leaves none of its connections open once it returns, closed loop or open loop: kept idle,
// they would count against the replica's cap on one client's connections through the next run in
// the same process (a flash sale, then a closed-loop run, as the compose tests do).
func TestRunLeavesNoConnectionOpen(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{})[0]
	var open atomic.Int64
	hs := httptest.NewUnstartedServer(r.Srv.Handler())
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	base := loadtest.Config{Targets: []string{hs.URL}, SKU: "CONNS-1", Stock: 1000, Qty: 1, Modes: []string{"zk"},
		AdminToken: ordertest.AdminToken, Timeout: 30 * time.Second}
	closed, openLoop := base, base
	closed.Requests, closed.Concurrency = 200, 20
	openLoop.Rate, openLoop.Duration = 200, time.Second
	for name, cfg := range map[string]loadtest.Config{"closed loop": closed, "open loop": openLoop} {
		rep, err := loadtest.Run(context.Background(), cfg, loadtest.NoProgress{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := rep.Check(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The client's close reaches the server within moments; a connection kept idle would
		// stay for the transport's IdleConnTimeout (30 s).
		deadline := time.Now().Add(5 * time.Second)
		for open.Load() != 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := open.Load(); n != 0 {
			t.Errorf("%s: %d connections still open 5 s after the run returned", name, n)
		}
	}
}
