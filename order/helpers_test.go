package order_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

func TestMain(m *testing.M) { testenv.Main(m, "ZK_SERVERS", "MYSQL_DSN", "REDIS_ADDR") }

const adminToken = ordertest.AdminToken

type replica = ordertest.Replica

type clusterOpts = ordertest.Options

func newCluster(t *testing.T, n int, o clusterOpts) []*replica { return ordertest.Start(t, n, o) }

type reply struct {
	status int
	body   map[string]any
	raw    string
	header http.Header
}

func (r reply) code() string { s, _ := r.body["code"].(string); return s }

func (r reply) codeLine() string { return fmt.Sprintf("%d %s", r.status, r.code()) }

func (r reply) orderID() int64 {
	o, _ := r.body["order"].(map[string]any)
	id, _ := o["id"].(float64)
	return int64(id)
}

var client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

func call(t testing.TB, method, url, body string, headers ...string) reply {
	t.Helper()
	return callAs(t, client, method, url, body, headers...)
}

// callAs is call as the HTTP client c (clientFrom: a client of its own address).
func callAs(t testing.TB, c *http.Client, method, url, body string, headers ...string) reply {
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
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return reply{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: string(raw), header: resp.Header}
	_ = json.NewDecoder(bytes.NewReader(raw)).Decode(&r.body)
	return r
}

func buy(t testing.TB, r *replica, sku string, qty int, key string) reply {
	return call(t, "POST", r.URL+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":%d}`, sku, qty), "Idempotency-Key", key)
}

func admin(t testing.TB, r *replica, method, path, body string) reply {
	return call(t, method, r.URL+path, body, "Authorization", "Bearer "+adminToken)
}

func resetStock(t testing.TB, r *replica, sku string, stock int) {
	t.Helper()
	if rep := admin(t, r, "PUT", "/admin/products/"+sku, fmt.Sprintf(`{"stock":%d}`, stock)); rep.status != 200 {
		t.Fatalf("reset %s: %d %s", sku, rep.status, rep.raw)
	}
}

func auditOf(t testing.TB, r *replica, sku string) inventory.Audit {
	t.Helper()
	a, err := r.Store.Audit(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
