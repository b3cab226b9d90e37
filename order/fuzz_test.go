package order_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
)

// The fuzz targets of the request parsers: every route's body, path parameters, query strings
// and headers (Content-Type, Authorization, Idempotency-Key). The property, for any input: no
// panic, no 5xx, an answer of 4xx changes nothing (the product's audit and the fleet's mode
// are as before), and a body with more than one reading (ambiguousNames) is not acted on (a POST
// or PUT with one is answered 4xx). Each target's corpus (testdata/fuzz/<target>) holds a seed per answer code the
// target can give, which TestFuzzCorporaAnswerEveryCode checks; `make test` fuzzes each for 1,000
// executions, and `make fuzz` for 10,000.
//
//	go test -run '^$' -fuzz '^FuzzAPI$' -fuzztime 10000x ./order

// fuzzSKU is the product every target watches; the seeds buy, cancel and reset it.
const fuzzSKU = "FUZZ-1"

// apiFuzz is one replica under fuzzing, its product stocked.
type apiFuzz struct {
	r *ordertest.Replica
	h http.Handler
}

func newAPIFuzz(tb testing.TB) *apiFuzz {
	rs := ordertest.Start(tb, 1, ordertest.Options{})
	if _, err := rs[0].Store.Reset(context.Background(), fuzzSKU, 1_000_000); err != nil {
		tb.Fatal(err)
	}
	if _, err := rs[0].Store.Reset(context.Background(), "FUZZ-0", 0); err != nil { // sold out: 409
		tb.Fatal(err)
	}
	return &apiFuzz{r: rs[0], h: rs[0].Srv.Handler()}
}

// state is what a refused request must leave as it was: the product's audit and the fleet's mode.
func (a *apiFuzz) state(t testing.TB) string {
	t.Helper()
	au, err := a.r.Store.Audit(context.Background(), fuzzSKU)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/admin/lock-mode", nil)
	req.Header.Set("Authorization", "Bearer "+ordertest.AdminToken)
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, req)
	mode := w.Body.String()
	if i := strings.Index(mode, `"members"`); i >= 0 {
		mode = mode[:i] // who is a member is not the request's doing
	}
	return fmt.Sprintf("%+v %d %s", au, w.Code, mode)
}

// serve sends one request as the fuzzer made it, normalized only where no HTTP server would
// hand it to a handler at all, checks the property and returns the answer's code.
func (a *apiFuzz) serve(t *testing.T, method, target, contentType, auth, key string, body []byte) int {
	t.Helper()
	switch method {
	case "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD":
	default:
		method = "POST"
	}
	if u, err := url.ParseRequestURI(target); err != nil || !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " #%\x00\r\n\t") ||
		u.Path == "/v1/events" {
		target = "/v1/orders" // (the live stream never ends by itself: not a parser)
	}
	before := a.state(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := httptest.NewRequest(method, target, strings.NewReader(string(body))).WithContext(ctx)
	setHeader(req, "Content-Type", contentType)
	setHeader(req, "Authorization", auth)
	setHeader(req, "Idempotency-Key", key)
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, req)
	if w.Code >= 500 {
		t.Fatalf("%s %s %q → %d %s", method, target, body, w.Code, w.Body.String())
	}
	if w.Code < 400 && (method == "POST" || method == "PUT") && ambiguousNames(body) { // (GETs read no body)
		t.Fatalf("%s %s %q, whose names have more than one reading, answered %d %s", method, target, body, w.Code, w.Body.String())
	}
	after := a.state(t)
	if w.Code >= 400 && after != before {
		t.Fatalf("%s %s %q answered %d %s but changed the state:\n%s\n→ %s", method, target, body, w.Code, w.Body.String(), before, after)
	}
	if au, err := a.r.Store.Audit(ctx, fuzzSKU); err != nil || au.Oversold != 0 || au.LostUpdates != 0 {
		t.Fatalf("%s %s %q → %d: audit %+v %v", method, target, body, w.Code, au, err)
	}
	return w.Code
}

// FuzzAPI throws arbitrary requests at the public routes (purchases, carts, cancels, look-ups)
// and at the admin routes without the token, which must all be refused.
func FuzzAPI(f *testing.F) {
	for _, s := range apiSeeds {
		f.Add(s.method, s.target, s.contentType, s.auth, s.key, []byte(s.body))
	}
	a := newAPIFuzz(f)
	f.Fuzz(func(t *testing.T, method, target, contentType, auth, key string, body []byte) {
		if auth == "Bearer "+ordertest.AdminToken {
			auth = ""
		}
		code := a.serve(t, method, target, contentType, auth, key, body)
		if strings.HasPrefix(target, "/admin") && code < 400 {
			t.Fatalf("admin request without the token answered %d", code)
		}
	})
}

// FuzzAdmin throws arbitrary requests with the admin token at the admin routes: their bodies and
// path parameters (PUT /admin/products/:sku, PUT /admin/lock-mode, POST /admin/fences/:issuer/lower).
func FuzzAdmin(f *testing.F) {
	for _, s := range adminSeeds {
		f.Add(s.method, s.target, s.contentType, []byte(s.body))
	}
	a := newAPIFuzz(f)
	f.Fuzz(func(t *testing.T, method, target, contentType string, body []byte) {
		if !strings.HasPrefix(target, "/admin/") {
			target = "/admin/" + strings.TrimPrefix(target, "/")
		}
		a.serve(t, method, target, contentType, "Bearer "+ordertest.AdminToken, "", body)
	})
}

type apiSeed struct{ method, target, contentType, auth, key, body string }

// The seeds in code: the committed corpus (testdata/fuzz) holds them and one per answer code.
var apiSeeds = []apiSeed{
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
	// Query strings and path parameters of the look-ups.
	{"GET", "/v1/orders?key=k-1", "", "", "", ``},
	{"GET", "/v1/orders/abc", "", "", "", ``},
	{"GET", "/v1/products?skus=FUZZ-1,../x", "", "", "", ``},
	{"GET", "/v1/products/FUZZ-1/orders?after=-1&limit=x", "", "", "", ``},
	{"GET", "/assets/..", "", "", "", ``},
	// Names with more than one reading: twice, in another case, by Unicode folding.
	{"POST", "/v1/orders", "application/json", "", "", `{"sku":"FUZZ-0","sku":"FUZZ-1","qty":1}`},
	{"POST", "/v1/orders", "application/json", "", "", `{"sku":"FUZZ-0","\u0073ku":"FUZZ-1","qty":1}`},
	{"POST", "/v1/orders", "application/json", "", "", `{"items":[{"sku":"FUZZ-0","sku":"FUZZ-1","qty":1}]}`},
	{"POST", "/v1/orders", "application/json", "", "", `{"SKU":"FUZZ-1","QTY":1}`},
	{"POST", "/v1/orders", "application/json", "", "", `{"ſku":"FUZZ-1","qty":1}`},
	{"POST", "/v1/orders", "application/json", "", "", `{"Items":[{"sku":"FUZZ-0","qty":1}],"items":[{"sku":"FUZZ-1","qty":1}]}`},
	{"POST", "/v1/orders/1/cancel", "application/json", "", "", `{"request_id":"k-2","Request_Id":"k-1"}`},
}

type adminSeed struct{ method, target, contentType, body string }

var adminSeeds = []adminSeed{
	{"PUT", "/admin/products/FUZZ-A", "application/json", `{"stock":5}`},
	{"PUT", "/admin/products/FUZZ-A", "application/json", `{"stock":-1}`},
	{"PUT", "/admin/products/FUZZ-A", "application/json", `{"stock":"5"}`},
	{"PUT", "/admin/products/FUZZ-A", "text/plain", `{"stock":5}`},
	{"PUT", "/admin/products/a%2Fb", "application/json", `{"stock":5}`},
	{"GET", "/admin/lock-mode", "", ``},
	{"PUT", "/admin/lock-mode", "application/json", `{"mode":"zk","version":999999}`},
	{"PUT", "/admin/lock-mode", "application/json", `{"mode":"memcached"}`},
	{"PUT", "/admin/lock-mode", "application/json", `{"mode":"zk","version":-1}`},
	{"POST", "/admin/fences/zookeeper/lower", "application/json", `{"token":0,"sku":"FUZZ-A"}`},
	{"POST", "/admin/fences/etcd/lower", "application/json", `{"token":0}`},
	{"POST", "/admin/fences/redis/lower", "application/json", `{"sku":"FUZZ-A"}`},
	{"DELETE", "/admin/lock-mode", "", ``},
	{"PUT", "/admin/nothing", "application/json", `{}`},
	{"PUT", "/admin/products/FUZZ-1", "application/json", `{"stock":5,"stock":0}`},
	{"PUT", "/admin/products/FUZZ-1", "application/json", `{"STOCK":0}`},
	{"PUT", "/admin/lock-mode", "application/json", `{"mode":"zk","MoDe":"none"}`},
	{"POST", "/admin/fences/zookeeper/lower", "application/json", `{"token":0,"to\u212aen":5}`},
}

// fieldNames are the names the routes' bodies read, as the API spells them.
var fieldNames = []string{"sku", "qty", "items", "request_id", "stock", "mode", "version", "token"}

// ambiguousNames says whether a JSON body has a name that another reader could take another way:
// two names of one object equal when case and Unicode folding are ignored (strings.EqualFold:
// "sku" and "ſku", "items" and "Items", and exact duplicates), or a name that is one of
// fieldNames only so. What follows invalid JSON is not looked at.
func ambiguousNames(body []byte) bool {
	type frame struct {
		object, wantName bool
		names            []string
	}
	var stack []*frame
	value := func() { // a value ended: its object's next token is a name
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantName = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, &frame{object: t == '{', wantName: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				value()
			}
			continue
		case string:
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantName {
				f := stack[n-1]
				for _, seen := range append(f.names, fieldNames...) {
					if strings.EqualFold(seen, t) && (seen != t || slices.Contains(f.names, t)) {
						return true
					}
				}
				f.names, f.wantName = append(f.names, t), false
				continue
			}
		}
		value()
	}
}

// The fuzz property's judge of "more than one reading" is not vacuous: it finds every form of
// issue 50's finding 3 (a name twice, escaped or not, at any depth; in another case; by Unicode
// folding), and passes a body with one reading (the same names in two objects of a cart).
func TestAmbiguousNamesFindsEveryOtherReading(t *testing.T) {
	for _, b := range []string{
		`{"sku":"P2","sku":"P1","qty":1}`, `{"sku":"P2","\u0073ku":"P1","qty":1}`, `{"items":[{"sku":"P2","sku":"P1","qty":1}]}`,
		`{"SKU":"P1","QTY":1}`, `{"ſku":"P1","qty":1}`, "{\"\u212aey\":1,\"key\":2}", `{"Items":[],"items":[]}`, `{"Request_Id":"k"}`,
	} {
		if !ambiguousNames([]byte(b)) {
			t.Errorf("%s: not found to have more than one reading", b)
		}
	}
	for _, b := range []string{`{"sku":"P1","qty":1}`, `{"items":[{"sku":"A","qty":1},{"sku":"B","qty":1}]}`, `{"extra":1}`} {
		if ambiguousNames([]byte(b)) {
			t.Errorf("%s: found to have more than one reading", b)
		}
	}
}

func setHeader(r *http.Request, k, v string) {
	if v == "" || strings.ContainsAny(v, "\r\n\x00") {
		r.Header.Del(k)
		return
	}
	r.Header.Set(k, v)
}

// readCorpus reads a target's committed corpus, in file-name order: each entry's values
// ("go test fuzz v1", then one Go literal a line: string("...") or []byte("...")).
func readCorpus(t *testing.T, target string) (names []string, entries [][]string) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range files {
		f, err := os.Open(filepath.Join(dir, fi.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var vals []string
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "go test fuzz v1" || line == "" {
				continue
			}
			lit, ok := strings.CutPrefix(line, "string(")
			if !ok {
				lit, ok = strings.CutPrefix(line, "[]byte(")
			}
			if !ok || !strings.HasSuffix(lit, ")") {
				t.Fatalf("%s: %q is not a string or []byte literal", fi.Name(), line)
			}
			v, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
			if err != nil {
				t.Fatalf("%s: %q: %v", fi.Name(), line, err)
			}
			vals = append(vals, v)
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		names = append(names, fi.Name())
		entries = append(entries, vals)
	}
	return names, entries
}

// Each target's committed corpus answers every code its routes can give a client that the
// property allows (every 2xx and 4xx; no 5xx), replayed in file-name order on a fresh replica.
func TestFuzzCorporaAnswerEveryCode(t *testing.T) {
	for target, want := range map[string][]int{
		"FuzzAPI":   {200, 201, 400, 401, 403, 404, 405, 409, 413, 415, 422},
		"FuzzAdmin": {200, 400, 404, 405, 409, 413, 415},
	} {
		t.Run(target, func(t *testing.T) {
			a := newAPIFuzz(t)
			names, entries := readCorpus(t, target)
			got := map[int][]string{}
			for i, v := range entries {
				var code int
				switch {
				case target == "FuzzAPI" && len(v) == 6:
					code = a.serve(t, v[0], v[1], v[2], v[3], v[4], []byte(v[5]))
				case target == "FuzzAdmin" && len(v) == 4:
					target := v[1]
					if !strings.HasPrefix(target, "/admin/") {
						target = "/admin/" + strings.TrimPrefix(target, "/")
					}
					code = a.serve(t, v[0], target, v[2], "Bearer "+ordertest.AdminToken, "", []byte(v[3]))
				default:
					t.Fatalf("%s: %d values", names[i], len(v))
				}
				got[code] = append(got[code], names[i])
			}
			for _, c := range want {
				if len(got[c]) == 0 {
					t.Errorf("no seed in testdata/fuzz/%s answers %d", target, c)
				}
			}
			var codes []int
			for c := range got {
				codes = append(codes, c)
			}
			slices.Sort(codes)
			t.Logf("%s: %d seeds, codes %v", target, len(names), codes)
		})
	}
}
