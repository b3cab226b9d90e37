package order_test

import (
	"strings"
	"testing"
)

func TestBadInputIsRejectedAndChangesNothing(t *testing.T) {
	rs := newCluster(t, 1, clusterOpts{})
	r := rs[0]
	sku := "SKU-bad"
	resetStock(t, r, sku, 10)
	before := auditOf(t, r, sku)
	held := r.Locks.Stats().Acquisitions // the fleet's barrier

	json := []string{"Content-Type", "application/json"}
	bearer := []string{"Authorization", "Bearer " + adminToken}
	cases := []struct {
		name    string
		method  string
		path    string
		body    string
		headers []string
		status  int
		code    string
	}{
		{"malformed JSON", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":1`, json, 400, "invalid_request"},
		{"not JSON at all", "POST", "/v1/orders", `sku=SKU-bad&qty=1`, json, 400, "invalid_request"},
		{"empty body", "POST", "/v1/orders", ``, json, 400, "invalid_request"},
		{"JSON array", "POST", "/v1/orders", `[{"sku":"SKU-bad","qty":1}]`, json, 400, "invalid_request"},
		{"two objects", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":1}{"sku":"SKU-bad","qty":1}`, json, 400, "invalid_request"},
		{"qty as string", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":"1"}`, json, 400, "invalid_request"},
		{"sku as number", "POST", "/v1/orders", `{"sku":42,"qty":1}`, json, 400, "invalid_request"},
		{"missing sku", "POST", "/v1/orders", `{"qty":1}`, json, 400, "invalid_request"},
		{"missing qty", "POST", "/v1/orders", `{"sku":"SKU-bad"}`, json, 400, "invalid_request"},
		{"null qty", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":null}`, json, 400, "invalid_request"},
		{"qty zero", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":0}`, json, 400, "invalid_request"},
		{"qty negative", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":-3}`, json, 400, "invalid_request"},
		{"qty over the limit", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":1001}`, json, 400, "invalid_request"},
		{"qty huge", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":1e30}`, json, 400, "invalid_request"},
		{"qty beyond int64", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":92233720368547758070}`, json, 400, "invalid_request"},
		{"qty not an integer", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":1.5}`, json, 400, "invalid_request"},
		{"unknown SKU", "POST", "/v1/orders", `{"sku":"NO-SUCH-SKU","qty":1}`, json, 404, "unknown_sku"},
		{"SKU with slash", "POST", "/v1/orders", `{"sku":"SKU/bad","qty":1}`, json, 400, "invalid_request"},
		{"SKU with dot-dot", "POST", "/v1/orders", `{"sku":"..","qty":1}`, json, 400, "invalid_request"},
		{"SKU of 65 characters", "POST", "/v1/orders", `{"sku":"` + strings.Repeat("A", 65) + `","qty":1}`, json, 400, "invalid_request"},
		{"empty SKU", "POST", "/v1/orders", `{"sku":"","qty":1}`, json, 400, "invalid_request"},
		{"SKU with space", "POST", "/v1/orders", `{"sku":"SKU bad","qty":1}`, json, 400, "invalid_request"},
		{"unknown field", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":1,"price":0}`, json, 400, "invalid_request"},
		{"body over 4 KiB", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":1,"pad":"` + strings.Repeat("x", 5000) + `"}`, json, 413, "body_too_large"},
		{"text/plain", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":1}`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"cancel: id not a number", "POST", "/v1/orders/abc/cancel", ``, nil, 400, "invalid_request"},
		{"cancel: id zero", "POST", "/v1/orders/0/cancel", ``, nil, 400, "invalid_request"},
		{"cancel: id negative", "POST", "/v1/orders/-1/cancel", ``, nil, 400, "invalid_request"},
		{"cancel: id beyond int64", "POST", "/v1/orders/92233720368547758070/cancel", ``, nil, 400, "invalid_request"},
		{"cancel: id with a sign", "POST", "/v1/orders/+1/cancel", ``, nil, 400, "invalid_request"},
		{"cancel: unknown order", "POST", "/v1/orders/9223372036854775807/cancel", `{"request_id":"k"}`, json, 404, "unknown_order"},
		{"cancel: no key", "POST", "/v1/orders/1/cancel", `{}`, json, 400, "invalid_request"},
		{"cancel: empty key", "POST", "/v1/orders/1/cancel", `{"request_id":""}`, json, 400, "invalid_request"},
		{"cancel: empty body, no Content-Type", "POST", "/v1/orders/1/cancel", ``, nil, 415, "unsupported_media_type"},
		{"cancel: empty JSON body, no key", "POST", "/v1/orders/1/cancel", ``, json, 400, "invalid_request"},
		{"purchase: key with the item separator", "POST", "/v1/orders", `{"sku":"BAD-1","qty":1}`, []string{"Content-Type", "application/json", "Idempotency-Key", "K#BAD-1"}, 400, "invalid_request"},
		{"cancel: unknown field", "POST", "/v1/orders/1/cancel", `{"reason":"x"}`, json, 400, "invalid_request"},
		{"cancel: body not JSON", "POST", "/v1/orders/1/cancel", `reason=x`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"cancel: array body", "POST", "/v1/orders/1/cancel", `[]`, json, 400, "invalid_request"},
		{"no content type", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":1}`, []string{"Content-Type", ""}, 415, "unsupported_media_type"},
		{"idempotency key too long", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":1}`, append([]string{"Idempotency-Key", strings.Repeat("k", 129)}, json...), 400, "invalid_request"},
		{"idempotency key with space", "POST", "/v1/orders", `{"sku":"SKU-bad","qty":1}`, append([]string{"Idempotency-Key", "a b"}, json...), 400, "invalid_request"},
		{"PUT on orders", "PUT", "/v1/orders", ``, nil, 405, "method_not_allowed"},
		{"order lookup without a key", "GET", "/v1/orders", ``, nil, 400, "invalid_request"},
		{"order lookup with an empty key", "GET", "/v1/orders?request_id=", ``, nil, 400, "invalid_request"},
		{"order lookup with two keys", "GET", "/v1/orders?request_id=a&request_id=b", ``, nil, 400, "invalid_request"},
		{"order lookup with another parameter", "GET", "/v1/orders?request_id=a&x=1", ``, nil, 400, "invalid_request"},
		{"order lookup with a long key", "GET", "/v1/orders?request_id=" + strings.Repeat("k", 129), ``, nil, 400, "invalid_request"},
		{"order lookup with a control character", "GET", "/v1/orders?request_id=a%01b", ``, nil, 400, "invalid_request"},
		{"order id not a number", "GET", "/v1/orders/abc", ``, nil, 400, "invalid_request"},
		{"order id zero", "GET", "/v1/orders/0", ``, nil, 400, "invalid_request"},
		{"order id negative", "GET", "/v1/orders/-5", ``, nil, 400, "invalid_request"},
		{"order id with a sign", "GET", "/v1/orders/+5", ``, nil, 400, "invalid_request"},
		{"order id with leading zeros", "GET", "/v1/orders/007", ``, nil, 400, "invalid_request"},
		{"order id beyond int64", "GET", "/v1/orders/99999999999999999999", ``, nil, 400, "invalid_request"},
		{"unknown order", "GET", "/v1/orders/9223372036854775807", ``, nil, 404, "unknown_order"},
		{"unknown order key", "GET", "/v1/orders?request_id=never-used", ``, nil, 404, "unknown_order"},
		{"orders page of a bad SKU", "GET", "/v1/products/SKU.bad/orders", ``, nil, 400, "invalid_request"},
		{"orders page of an unknown SKU", "GET", "/v1/products/SKU-none/orders", ``, nil, 404, "unknown_sku"},
		{"orders page limit zero", "GET", "/v1/products/SKU-bad/orders?limit=0", ``, nil, 400, "invalid_request"},
		{"orders page limit negative", "GET", "/v1/products/SKU-bad/orders?limit=-1", ``, nil, 400, "invalid_request"},
		{"orders page limit too large", "GET", "/v1/products/SKU-bad/orders?limit=501", ``, nil, 400, "invalid_request"},
		{"orders page limit not a number", "GET", "/v1/products/SKU-bad/orders?limit=ten", ``, nil, 400, "invalid_request"},
		{"orders page after negative", "GET", "/v1/products/SKU-bad/orders?after=-1", ``, nil, 400, "invalid_request"},
		{"orders page after beyond int64", "GET", "/v1/products/SKU-bad/orders?after=99999999999999999999", ``, nil, 400, "invalid_request"},
		{"orders page unknown parameter", "GET", "/v1/products/SKU-bad/orders?page=2", ``, nil, 400, "invalid_request"},
		{"unknown route", "GET", "/v2/orders", ``, nil, 404, "not_found"},
		{"product with bad SKU", "GET", "/v1/products/SKU.bad", ``, nil, 400, "invalid_request"},
		{"unknown product", "GET", "/v1/products/NO-SUCH", ``, nil, 404, "unknown_sku"},
		{"audit of unknown product", "GET", "/v1/products/NO-SUCH/audit", ``, nil, 404, "unknown_sku"},
		{"admin without token", "PUT", "/admin/products/SKU-bad", `{"stock":1}`, json, 401, "unauthorized"},
		{"admin with wrong token", "PUT", "/admin/products/SKU-bad", `{"stock":1}`, append([]string{"Authorization", "Bearer nope"}, json...), 401, "unauthorized"},
		{"admin with basic auth", "GET", "/admin/lock-mode", ``, []string{"Authorization", "Basic dGVzdA=="}, 401, "unauthorized"},
		{"negative stock", "PUT", "/admin/products/SKU-bad", `{"stock":-1}`, append(bearer, json...), 400, "invalid_request"},
		{"stock as string", "PUT", "/admin/products/SKU-bad", `{"stock":"5"}`, append(bearer, json...), 400, "invalid_request"},
		{"reset with bad SKU", "PUT", "/admin/products/SKU.bad", `{"stock":5}`, append(bearer, json...), 400, "invalid_request"},
		{"unknown lock mode", "PUT", "/admin/lock-mode", `{"mode":"memcached"}`, append(bearer, json...), 400, "invalid_request"},
		{"lock mode missing", "PUT", "/admin/lock-mode", `{}`, append(bearer, json...), 400, "invalid_request"},
		{"lock mode unknown field", "PUT", "/admin/lock-mode", `{"mode":"zk","force":true}`, append(bearer, json...), 400, "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := call(t, c.method, r.URL+c.path, c.body, c.headers...)
			if rep.status != c.status || rep.code() != c.code {
				t.Fatalf("got %d %s, want %d %s", rep.status, rep.raw, c.status, c.code)
			}
			// A purchase that got as far as a key names it ("request_id"), so that its client can
			// look it up; nothing else adds to the two fields.
			fields := 2
			if key, ok := rep.body["request_id"].(string); ok && key != "" && c.method == "POST" && c.path == "/v1/orders" {
				fields = 3
			}
			if msg, _ := rep.body["error"].(string); msg == "" || len(rep.body) != fields {
				t.Fatalf("error body %s: want exactly {\"error\": ..., \"code\": ...} (and a purchase's \"request_id\")", rep.raw)
			}
		})
	}
	if after := auditOf(t, r, sku); after != before {
		t.Fatalf("rejected requests changed the tables: %+v -> %+v", before, after)
	}
	if m := r.Srv.Mode(); m != "zk" {
		t.Fatalf("a rejected admin request changed the mode to %s", m)
	}
	if acquisitions := r.Locks.Stats().Acquisitions - held; acquisitions != 0 {
		t.Fatalf("bad requests took the lock %d times: validation must come first", acquisitions)
	}
}
