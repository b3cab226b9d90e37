package order_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/zkstock/zkstock/internal/ordertest"
)

// FuzzAPI throws arbitrary requests at the purchase and admin handlers: no panic, no 5xx, and
// nothing that is rejected touches the stock or the orders. The admin token is never guessed,
// so every admin request must be refused.
//
//	go test -run '^$' -fuzz FuzzAPI -fuzztime 30s ./order     (make test-faults does this)
func FuzzAPI(f *testing.F) {
	seeds := []struct {
		method, path, contentType, auth, key, body string
	}{
		{"POST", "/v1/orders", "application/json", "", "", `{"sku":"FUZZ-1","qty":1}`},
		{"POST", "/v1/orders", "application/json", "", "k-1", `{"sku":"FUZZ-1","qty":2}`},
		{"POST", "/v1/orders", "application/json; charset=utf-8", "", "", `{"sku":"FUZZ-1","qty":1e3}`},
		{"POST", "/v1/orders", "text/plain", "", "", `{"sku":"FUZZ-1","qty":1}`},
		{"POST", "/v1/orders", "application/json", "", "", `{"sku":"../x","qty":-1,"extra":[]}`},
		// Another spelling of FUZZ-1: another lock, so another product (it once sold FUZZ-1's stock).
		{"POST", "/v1/orders", "application/json", "", "", `{"sku":"fuzz-1","qty":1}`},
		{"PUT", "/admin/products/FUZZ-1", "application/json", "Bearer wrong", "", `{"stock":0}`},
		{"PUT", "/admin/lock-mode", "application/json", "Basic Zm9v", "", `{"mode":"none"}`},
		{"GET", "/v1/products/FUZZ-1/lock", "", "", "", ``},
		{"DELETE", "/v1/orders", "application/json", "", "", `{}`},
		// The purchase's key is the capability to cancel: no body, a form, a guessed key.
		{"POST", "/v1/orders/1/cancel", "", "", "", ``},
		{"POST", "/v1/orders/1/cancel", "application/x-www-form-urlencoded", "", "", `request_id=k-1`},
		{"POST", "/v1/orders/1/cancel", "application/json", "", "", `{"request_id":"k-2"}`},
		{"POST", "/v1/orders/1/cancel", "application/json", "Bearer wrong", "", `{}`},
		// An item key of a cart is out of the clients' reach; a key reused with another body sells nothing.
		{"POST", "/v1/orders", "application/json", "", "k-1#FUZZ-1", `{"sku":"FUZZ-1","qty":2}`},
		{"POST", "/v1/orders", "application/json", "", "k-1", `{"items":[{"sku":"FUZZ-1","qty":2}]}`},
		{"POST", "/admin/fences/zookeeper/lower", "application/json", "Bearer wrong", "", `{"token":0}`},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.contentType, s.auth, s.key, []byte(s.body))
	}
	rs := ordertest.Start(f, 1, ordertest.Options{})
	r := rs[0]
	h := r.Srv.Handler()
	const sku = "FUZZ-1"
	ctx := context.Background()
	if _, err := r.Store.Reset(ctx, sku, 1_000_000); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path, contentType, auth, key string, body []byte) {
		switch method {
		case "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD":
		default:
			method = "POST"
		}
		// Keep to request targets an HTTP server would parse at all; the rest never reach a handler.
		if u, err := url.ParseRequestURI(path); err != nil || !strings.HasPrefix(path, "/") || u.RawQuery != "" || strings.ContainsAny(path, " #%") {
			path = "/v1/orders"
		}
		if auth == "Bearer "+ordertest.AdminToken {
			auth = ""
		}
		before, err := r.Store.Audit(ctx, sku)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(method, path, strings.NewReader(string(body)))
		setHeader(req, "Content-Type", contentType)
		setHeader(req, "Authorization", auth)
		setHeader(req, "Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q → %d %s", method, path, body, w.Code, w.Body.String())
		}
		after, err := r.Store.Audit(ctx, sku)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case w.Code == http.StatusCreated:
			if after.UnitsSold <= before.UnitsSold || after.Stock >= before.Stock || after.LostUpdates != 0 {
				t.Fatalf("201 but the audit went %+v → %+v", before, after)
			}
		case after != before:
			t.Fatalf("%s %s answered %d but changed the audit %+v → %+v", method, path, w.Code, before, after)
		}
		if strings.HasPrefix(path, "/admin") && w.Code < 400 && w.Code != http.StatusNotFound {
			t.Fatalf("admin request without the token answered %d", w.Code)
		}
	})
}

func setHeader(r *http.Request, k, v string) {
	if v == "" || strings.ContainsAny(v, "\r\n\x00") {
		r.Header.Del(k)
		return
	}
	r.Header.Set(k, v)
}
