package order_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/order"
)

func TestMain(m *testing.M) { testenv.Main(m, "ZK_SERVERS", "MYSQL_DSN") }

const adminToken = "test-admin"

// replica is one order service in the test process, with its own lock client (ZooKeeper
// session) and its own database pool, as a separate process would have.
type replica struct {
	name  string
	srv   *order.Server
	url   string
	locks *dlock.Client
	store *inventory.Store
}

type clusterOpts struct {
	mode        order.LockMode
	workDelay   time.Duration
	lockTimeout time.Duration
	zkServers   []string // default: the test ZooKeeper
	adminToken  *string
	dsn         string
}

func testLog() *slog.Logger {
	if os.Getenv("ORDER_TEST_LOG") != "" {
		return slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

func newCluster(t *testing.T, n int, o clusterOpts) []*replica {
	t.Helper()
	if o.mode == "" {
		o.mode = order.ModeZK
	}
	if o.lockTimeout == 0 {
		o.lockTimeout = 30 * time.Second
	}
	if o.zkServers == nil {
		o.zkServers = testenv.ZKServers(t)
	}
	if o.dsn == "" {
		o.dsn = testenv.MySQLDatabase(t)
	}
	token := adminToken
	if o.adminToken != nil {
		token = *o.adminToken
	}
	ctx := context.Background()
	var out []*replica
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("order%d", i)
		store, err := inventory.Open(ctx, o.dsn, inventory.PoolOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		if err := store.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		locks, err := dlock.Connect(cctx, o.zkServers, dlock.WithOwner(name), dlock.WithSessionTimeout(10*time.Second))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = locks.Close() })
		cfg := order.Config{ReplicaID: name, LockMode: o.mode, LockTimeout: o.lockTimeout, WorkDelay: o.workDelay, AdminToken: token}
		srv, err := order.New(cfg, store, locks, testLog())
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		out = append(out, &replica{name: name, srv: srv, url: hs.URL, locks: locks, store: store})
	}
	return out
}

type reply struct {
	status int
	body   map[string]any
	raw    string
}

func (r reply) code() string { s, _ := r.body["code"].(string); return s }

func (r reply) orderID() int64 {
	o, _ := r.body["order"].(map[string]any)
	id, _ := o["id"].(float64)
	return int64(id)
}

var client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

func call(t testing.TB, method, url, body string, headers ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return reply{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: string(raw)}
	_ = json.NewDecoder(bytes.NewReader(raw)).Decode(&r.body)
	return r
}

func buy(t testing.TB, r *replica, sku string, qty int, key string) reply {
	return call(t, "POST", r.url+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":%d}`, sku, qty), "Idempotency-Key", key)
}

func admin(t testing.TB, r *replica, method, path, body string) reply {
	return call(t, method, r.url+path, body, "Authorization", "Bearer "+adminToken)
}

func resetStock(t testing.TB, r *replica, sku string, stock int) {
	t.Helper()
	if rep := admin(t, r, "PUT", "/admin/products/"+sku, fmt.Sprintf(`{"stock":%d}`, stock)); rep.status != 200 {
		t.Fatalf("reset %s: %d %s", sku, rep.status, rep.raw)
	}
}

func auditOf(t testing.TB, r *replica, sku string) inventory.Audit {
	t.Helper()
	a, err := r.store.Audit(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
