package order_test

import (
	"bytes"
	"compress/gzip"
	"strconv"
	"testing"
)

// Issue 50, finding 3: a body with another reading than the one the replica would act on (a
// name twice, a name that differs only in case or by Unicode folding, an unknown name) is
// refused with 400 invalid_request on every route that reads a body, and nothing is sold or
// changed; a body with a Content-Encoding, true or not, is refused with 415 unsupported_encoding.
// On the code before, {"sku":"P2","sku":"P1","qty":1} sold P1 (201), and so did {"SKU":..}.
func TestAmbiguousBodiesAreRefused(t *testing.T) {
	r := newCluster(t, 1, clusterOpts{})[0]
	resetStock(t, r, "P1", 10)
	resetStock(t, r, "P2", 10)
	sold := buy(t, r, "P1", 1, "amb-1")
	if sold.status != 201 {
		t.Fatalf("purchase: %s", sold.raw)
	}
	before1, before2 := auditOf(t, r, "P1"), auditOf(t, r, "P2")
	mode := r.Srv.Mode()
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write([]byte(`{"sku":"P1","qty":1}`))
	_ = zw.Close()
	bearer := []string{"Authorization", "Bearer " + adminToken}
	cancel := "/v1/orders/" + strconv.FormatInt(sold.orderID(), 10) + "/cancel"
	for _, c := range []struct {
		name, path, method, body string
		headers                  []string
		status                   int
		code                     string
	}{
		{"a name twice", "/v1/orders", "POST", `{"sku":"P2","sku":"P1","qty":1}`, nil, 400, "invalid_request"},
		{"a name twice, once escaped", "/v1/orders", "POST", `{"sku":"P2","\u0073ku":"P1","qty":1}`, nil, 400, "invalid_request"},
		{"names in upper case", "/v1/orders", "POST", `{"SKU":"P1","QTY":1}`, nil, 400, "invalid_request"},
		{"a name by Unicode folding (long s)", "/v1/orders", "POST", `{"ſku":"P1","qty":1}`, nil, 400, "invalid_request"},
		{"a name by Unicode folding (Kelvin sign)", "/v1/orders", "POST", "{\"sku\":\"P1\",\"qty\":1,\"\u212aey\":1}", nil, 400, "invalid_request"},
		{"Items beside items", "/v1/orders", "POST", `{"Items":[{"sku":"P2","qty":1}],"items":[{"sku":"P1","qty":1}]}`, nil, 400, "invalid_request"},
		{"a cart item's name twice", "/v1/orders", "POST", `{"items":[{"sku":"P2","sku":"P1","qty":1}]}`, nil, 400, "invalid_request"},
		{"a cart item's name in upper case", "/v1/orders", "POST", `{"items":[{"SKU":"P1","qty":1}]}`, nil, 400, "invalid_request"},
		{"cancel: request_id twice", cancel, "POST", `{"request_id":"nope","request_id":"amb-1"}`, nil, 400, "invalid_request"},
		{"cancel: Request_ID", cancel, "POST", `{"Request_ID":"amb-1"}`, nil, 400, "invalid_request"},
		{"admin: stock twice", "/admin/products/P2", "PUT", `{"stock":10,"stock":0}`, bearer, 400, "invalid_request"},
		{"admin: Stock", "/admin/products/P2", "PUT", `{"Stock":0}`, bearer, 400, "invalid_request"},
		{"admin: mode twice", "/admin/lock-mode", "PUT", `{"mode":"zk","mode":"none"}`, bearer, 400, "invalid_request"},
		{"admin: MODE", "/admin/lock-mode", "PUT", `{"MODE":"none"}`, bearer, 400, "invalid_request"},
		{"admin: token twice", "/admin/fences/zookeeper/lower", "POST", `{"token":0,"token":1,"sku":"P2"}`, bearer, 400, "invalid_request"},
		{"labelled gzip, sent plain", "/v1/orders", "POST", `{"sku":"P1","qty":1}`, []string{"Content-Encoding", "gzip"}, 415, "unsupported_encoding"},
		{"gzip, sent gzipped", "/v1/orders", "POST", zipped.String(), []string{"Content-Encoding", "gzip"}, 415, "unsupported_encoding"},
		{"a coding after identity", "/v1/orders", "POST", `{"sku":"P1","qty":1}`, []string{"Content-Encoding", "identity, br"}, 415, "unsupported_encoding"},
		{"cancel: labelled deflate", cancel, "POST", `{"request_id":"amb-1"}`, []string{"Content-Encoding", "deflate"}, 415, "unsupported_encoding"},
		{"admin: labelled gzip", "/admin/products/P2", "PUT", `{"stock":0}`, append([]string{"Content-Encoding", "gzip"}, bearer...), 415, "unsupported_encoding"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := call(t, c.method, r.URL+c.path, c.body, c.headers...)
			if rep.status != c.status || rep.code() != c.code { // the code before: 201 created, 200 cancelled, 200 reset
				t.Fatalf("%s %s %s: %d %s, want %d %s", c.method, c.path, c.body, rep.status, rep.raw, c.status, c.code)
			}
			if msg, _ := rep.body["error"].(string); msg == "" {
				t.Fatalf("no error text: %s", rep.raw)
			}
		})
	}
	if a1, a2 := auditOf(t, r, "P1"), auditOf(t, r, "P2"); a1 != before1 || a2 != before2 {
		t.Fatalf("refused bodies changed the stock: %+v %+v -> %+v %+v", before1, before2, a1, a2)
	}
	if m := r.Srv.Mode(); m != mode {
		t.Fatalf("a refused body switched the mode to %s", m)
	}
	// The one reading is still read.
	if rep := call(t, "POST", r.URL+"/v1/orders", `{"sku":"P2","qty":1}`, "Content-Encoding", "identity"); rep.status != 201 {
		t.Fatalf("a plain purchase labelled identity: %s", rep.raw)
	}
}
