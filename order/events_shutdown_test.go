package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// runReplica runs one replica as orderd does (order.Run: its own listener, its server's timeouts
// and shutdown), until stop; stop returns how long the shutdown took and Run's error.
func runReplica(t *testing.T, streams int) (url, dsn string, stop func() (time.Duration, error)) {
	t.Helper()
	return runReplicaWith(t, func(cfg *order.Config) { cfg.EventStreams = streams })
}

// runReplicaWith is runReplica with its configuration changed by set first.
func runReplicaWith(t *testing.T, set func(*order.Config)) (url, dsn string, stop func() (time.Duration, error)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dsn = testenv.MySQLDatabase(t)
	testenv.DeleteZKTreeAtCleanup(t, testenv.ZKServers(t), order.FleetRoot+"/"+fleetOfDSN(t, dsn))
	cfg := order.Config{HTTPAddr: addr, ReplicaID: "run1", Fleet: fleetOfDSN(t, dsn), ZKServers: testenv.ZKServers(t), ZKSessionTimeout: 10 * time.Second,
		ZKAuth: ordertest.ZKAuth(), MySQLDSN: dsn, LockMode: order.ModeZK, LockTimeout: 5 * time.Second, AdminToken: adminToken,
		RedisAddr: os.Getenv("REDIS_ADDR"), RedisLockTTL: 3 * time.Second}
	set(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- order.Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	var once sync.Once
	var took time.Duration
	var runErr error
	stop = func() (time.Duration, error) {
		once.Do(func() {
			start := time.Now()
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(45 * time.Second):
				runErr = errors.New("Run did not return 45 s after its context ended")
			}
			took = time.Since(start)
		})
		return took, runErr
	}
	t.Cleanup(func() { stop() })
	url = "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("Run: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica was not ready within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return url, dsn, stop
}

// bigEvents stocks sku and makes every event of the live page about 2 MB, by adding four ghost
// members to the replica's fleet in ZooKeeper, each saying at length why it does not serve: a few
// events fill any socket buffer, so that a reader that does not read blocks the stream's writes at
// once, as it would after a long while with small events.
func bigEvents(t *testing.T, url, dsn, sku string) {
	t.Helper()
	if rep := call(t, "PUT", url+"/admin/products/"+sku, `{"stock":10}`, "Authorization", "Bearer "+adminToken); rep.status != 200 {
		t.Fatalf("reset: %d %s", rep.status, rep.raw)
	}
	conn := testenv.ZKConn(t, testenv.ZKServers(t))
	members := order.FleetRoot + "/" + fleetOfDSN(t, dsn) + "/members"
	why := strings.Repeat("a ghost member that never serves; ", 500_000/34)
	for i := range 4 {
		data, _ := json.Marshal(map[string]any{"modes": []string{}, "serving": false, "why": why})
		p := fmt.Sprintf("%s/ghost-%d", members, i)
		if _, err := conn.Create(p, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("ghost member %s: %v", p, err)
		}
		t.Cleanup(func() { _ = conn.Delete(p, -1) })
	}
}

// fleetOfDSN is the fleet of a test's replicas on one database: the database's name.
func fleetOfDSN(t *testing.T, dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.DBName
}

// stalledReader opens a stream and never reads it, with a small receive buffer.
func stalledReader(t *testing.T, url, sku string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c, "GET /v1/events?sku=%s HTTP/1.1\r\nHost: zkstock\r\n\r\n", sku); err != nil {
		t.Fatal(err)
	}
	return c
}

// streamStatus opens a stream and closes it at once: 200, or 503 too_many_streams.
func streamStatus(t *testing.T, url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A reader that stops reading is dropped, and its place freed, within 5 s.
func TestStalledReaderIsDropped(t *testing.T) {
	url, dsn, _ := runReplica(t, 1)
	const sku = "EV-STALL"
	bigEvents(t, url, dsn, sku)
	start := time.Now()
	stalledReader(t, url, sku)
	time.Sleep(300 * time.Millisecond)
	if st := streamStatus(t, url+"/v1/events?sku="+sku); st != 503 {
		t.Fatalf("a second stream beside the stalled one (EVENT_STREAMS=1): %d, want 503", st)
	}
	for streamStatus(t, url+"/v1/events?sku="+sku) != 200 {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the stalled reader still holds its stream after 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	dropped := time.Since(start)
	t.Logf("the stalled reader was dropped %v after it connected (write deadline %v)", dropped.Round(time.Millisecond), order.StreamWriteTimeout)
	if dropped > 5*time.Second {
		t.Fatalf("the stalled reader was dropped after %v, want within 5 s", dropped)
	}
}

// A shutdown does not wait for a reader that does not read.
func TestShutdownWithStalledReader(t *testing.T) {
	url, dsn, stop := runReplica(t, 0)
	const sku = "EV-STALL"
	bigEvents(t, url, dsn, sku)
	stalledReader(t, url, sku)
	time.Sleep(1200 * time.Millisecond) // its writes are blocked by now
	took, err := stop()
	t.Logf("shutdown took %v: %v", took.Round(time.Millisecond), err)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took > 2*time.Second {
		t.Fatalf("shutdown took %v with a stalled reader, want within 2 s", took)
	}
}

// A stream lives past the server's ReadTimeout and WriteTimeout, which bound every other route.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	defer order.SetHTTPTimeouts(time.Second, 5*time.Second)()
	url, _, _ := runReplica(t, 0) // WriteTimeout 5 s
	const sku = "EV-LONG"
	if rep := call(t, "PUT", url+"/admin/products/"+sku, `{"stock":10}`, "Authorization", "Bearer "+adminToken); rep.status != 200 {
		t.Fatalf("reset: %d %s", rep.status, rep.raw)
	}
	events, _ := drainStream(t, url+"/v1/events?sku="+sku)
	time.Sleep(7 * time.Second)
	n := events.Load()
	time.Sleep(1500 * time.Millisecond)
	if m := events.Load(); m <= n {
		t.Fatalf("the stream stopped after %d events, past the server's timeouts", n)
	}
	// A request that sends its headers too slowly is cut by ReadHeaderTimeout (5 s) or ReadTimeout.
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "POST /v1/orders HTTP/1.1\r\nHost: zkstock\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.ReadAll(c)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("a request whose body never came held its connection %v; ReadTimeout is 1 s", took)
	}
}
