package order_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// Where two features meet. Each test here failed on the service before the table of lock modes
// and the one token space.

func setMode(t *testing.T, rs []*replica, mode order.LockMode) {
	t.Helper()
	for _, r := range rs {
		if rep := admin(t, r, "PUT", "/admin/lock-mode", fmt.Sprintf(`{"mode":%q}`, mode)); rep.status != 200 {
			t.Fatalf("switch %s to %s: %d %s", r.Name, mode, rep.status, rep.raw)
		}
	}
}

// Switching modes, in the order a tutorial might, on three replicas that each buy after every
// switch: every purchase sells. ZooKeeper's recipes share one token definition, and Redis's tokens
// are fenced by a mark of their own, so no mode's holder is refused for another's tokens.
func TestModeSwitchesKeepSelling(t *testing.T) {
	rs := newCluster(t, 3, clusterOpts{})
	const sku = "SEAM-SWITCH"
	resetStock(t, rs[0], sku, 1000)
	sequence := []order.LockMode{order.ModeZK, order.ModeZKHerd, order.ModeZK, order.ModeRedisFenced, order.ModeZK, order.ModeZKBatch,
		order.ModeZKHerd, order.ModeRedisFenced, order.ModeZKUnfenced, order.ModeZK}
	sold := 0
	for step, mode := range sequence {
		setMode(t, rs, mode)
		for i, r := range rs {
			rep := buy(t, r, sku, 1, fmt.Sprintf("switch-%d-%d", step, i))
			if rep.status != 201 {
				t.Fatalf("step %d (%s), %s: %d %s", step, mode, r.Name, rep.status, rep.raw)
			}
			sold++
		}
	}
	if a := auditOf(t, rs[0], sku); a.UnitsSold != int64(sold) || a.Stock != 1000-int64(sold) || a.LostUpdates != 0 {
		t.Fatalf("audit %+v after %d sales", a, sold)
	}
}

// One replica: zk-herd sells, then zk sells, twice in a row (zk answered 503 stale_token).
func TestHerdThenFairLockOnOneReplica(t *testing.T) {
	r := newCluster(t, 1, clusterOpts{})[0]
	const sku = "SEAM-HERD"
	resetStock(t, r, sku, 10)
	for round := range 2 {
		for _, mode := range []order.LockMode{order.ModeZKHerd, order.ModeZK} {
			setMode(t, []*replica{r}, mode)
			if rep := buy(t, r, sku, 1, ""); rep.status != 201 {
				t.Fatalf("round %d, %s: %d %s", round, mode, rep.status, rep.raw)
			}
		}
	}
}

// A key reused with another body while another attempt under it holds it (a client that resends
// at once, its earlier attempt's holding not yet released; an attempt on another replica) is 422
// idempotency_key_reused at once: the order under the key says so, whatever that attempt does.
// Found by make test's TestKeysOfCartsAndPurchasesDoNotCollide, which drew 409 request_in_progress
// ("may still succeed") when a refused attempt's holding outlived its answer.
func TestAKeyReusedWhileHeldByAnotherAttemptIsRefusedReused(t *testing.T) {
	r := newCluster(t, 1, clusterOpts{LockTimeout: 5 * time.Second})[0]
	for _, sku := range []string{"REUSE-HELD-A", "REUSE-HELD-B"} {
		resetStock(t, r, sku, 10)
	}
	const key = "K-REUSE-HELD"
	cart := `{"items":[{"sku":"REUSE-HELD-A","qty":1},{"sku":"REUSE-HELD-B","qty":2}]}`
	if rep := call(t, "POST", r.URL+"/v1/orders", cart, "Idempotency-Key", key); rep.status != 201 {
		t.Fatalf("cart: %d %s", rep.status, rep.raw)
	}
	ctx := context.Background()
	if held, _, err := r.Store.HoldKey(ctx, key, "another-attempt", "elsewhere", time.Minute); err != nil || !held {
		t.Fatalf("the other attempt's holding: held %v, %v", held, err)
	}
	for name, body := range map[string]string{
		"a single item":      `{"sku":"REUSE-HELD-B","qty":2}`,
		"another quantity":   `{"items":[{"sku":"REUSE-HELD-A","qty":1},{"sku":"REUSE-HELD-B","qty":3}]}`,
		"a part of the cart": `{"items":[{"sku":"REUSE-HELD-A","qty":1}]}`,
	} {
		began := time.Now()
		rep := call(t, "POST", r.URL+"/v1/orders", body, "Idempotency-Key", key)
		if rep.status != 422 || rep.code() != "idempotency_key_reused" {
			t.Errorf("%s under a key held by another attempt: %s %s, want 422 idempotency_key_reused", name, rep.codeLine(), rep.raw)
		}
		if took := time.Since(began); took > 4*time.Second {
			t.Errorf("%s: answered after %v, as if it waited out the holding (LOCK_TIMEOUT 5 s)", name, took)
		}
	}
	if rep := call(t, "POST", r.URL+"/v1/orders", cart, "Idempotency-Key", key); rep.status != 200 || rep.body["replayed"] != true {
		t.Errorf("the same cart again, its key held by another attempt: %s %s, want 200 replayed", rep.codeLine(), rep.raw)
	}
	if a := auditOf(t, r, "REUSE-HELD-B"); a.Stock != 8 {
		t.Errorf("audit %+v: a refused reuse sold", a)
	}
}

// A cart's key and single purchases' keys live in one namespace where they cannot collide: the
// same key with another body is 422 on any replica and sells nothing, and a client key cannot
// name a cart item's order.
func TestKeysOfCartsAndPurchasesDoNotCollide(t *testing.T) {
	rs := newCluster(t, 3, clusterOpts{})
	for _, sku := range []string{"SEAM-A", "SEAM-B"} {
		resetStock(t, rs[0], sku, 10)
	}
	cart := `{"items":[{"sku":"SEAM-A","qty":1},{"sku":"SEAM-B","qty":2}]}`
	if rep := call(t, "POST", rs[0].URL+"/v1/orders", cart, "Idempotency-Key", "K-CART"); rep.status != 201 {
		t.Fatalf("cart: %d %s", rep.status, rep.raw)
	}
	if rep := call(t, "POST", rs[1].URL+"/v1/orders", cart, "Idempotency-Key", "K-CART"); rep.status != 200 || rep.body["replayed"] != true {
		t.Fatalf("the same cart again: %d %s", rep.status, rep.raw)
	}
	before := rs[2].Locks.Stats().Acquisitions
	for name, c := range map[string]struct{ body, key string }{
		"a part of the cart":              {`{"items":[{"sku":"SEAM-A","qty":1}]}`, "K-CART"},
		"the cart's key, a single item":   {`{"sku":"SEAM-A","qty":1}`, "K-CART"},
		"the cart with another quantity":  {`{"items":[{"sku":"SEAM-A","qty":1},{"sku":"SEAM-B","qty":3}]}`, "K-CART"},
		"the cart's key, the other item":  {`{"sku":"SEAM-B","qty":2}`, "K-CART"},
		"the cart with one more item too": {`{"items":[{"sku":"SEAM-A","qty":1},{"sku":"SEAM-B","qty":2},{"sku":"SEAM-C","qty":1}]}`, "K-CART"},
	} {
		if name == "the cart with one more item too" {
			resetStock(t, rs[0], "SEAM-C", 10)
		}
		if rep := call(t, "POST", rs[2].URL+"/v1/orders", c.body, "Idempotency-Key", c.key); rep.status != 422 || rep.code() != "idempotency_key_reused" {
			t.Errorf("%s: %d %s, want 422 idempotency_key_reused", name, rep.status, rep.raw)
		}
	}
	if after := rs[2].Locks.Stats().Acquisitions; after != before {
		t.Errorf("refused key reuses took %d locks; a reused key is refused before any lock", after-before)
	}
	// An item's key is out of the clients' reach.
	if rep := call(t, "POST", rs[0].URL+"/v1/orders", `{"sku":"SEAM-A","qty":1}`, "Idempotency-Key", "K-CART#SEAM-A"); rep.status != 400 {
		t.Errorf("a key naming a cart item's order: %d %s, want 400", rep.status, rep.raw)
	}
	// A single purchase's key cannot become a cart's.
	if rep := buy(t, rs[0], "SEAM-A", 1, "K-ONE"); rep.status != 201 {
		t.Fatalf("purchase: %d %s", rep.status, rep.raw)
	}
	if rep := call(t, "POST", rs[1].URL+"/v1/orders", `{"items":[{"sku":"SEAM-A","qty":1}]}`, "Idempotency-Key", "K-ONE"); rep.status != 422 {
		t.Errorf("a cart under a purchase's key: %d %s, want 422", rep.status, rep.raw)
	}
	a, b := auditOf(t, rs[0], "SEAM-A"), auditOf(t, rs[0], "SEAM-B")
	if a.UnitsSold != 2 || a.Stock != 8 || b.UnitsSold != 2 || b.Stock != 8 {
		t.Fatalf("refused requests sold: A %+v, B %+v", a, b)
	}
}

// The purchase's key is the capability to cancel its order: a wrong key is 403, none is 400, and
// neither changes anything; a cart's key cancels any of the cart's orders; a look-up by id does not
// hand the key out.
func TestCancelNeedsThePurchaseKey(t *testing.T) {
	r := newCluster(t, 1, clusterOpts{})[0]
	for _, sku := range []string{"SEAM-CA", "SEAM-CB"} {
		resetStock(t, r, sku, 10)
	}
	bought := buy(t, r, "SEAM-CA", 2, "K-CANCEL")
	id := bought.orderID()
	url := fmt.Sprintf("%s/v1/orders/%d/cancel", r.URL, id)
	if rep := call(t, "POST", url, `{"request_id":"K-OTHER"}`); rep.status != 403 || rep.code() != "wrong_key" {
		t.Fatalf("a wrong key: %d %s", rep.status, rep.raw)
	}
	if rep := call(t, "POST", url, `{}`); rep.status != 400 {
		t.Fatalf("no key: %d %s", rep.status, rep.raw)
	}
	if rep := call(t, "POST", url, ``); rep.status != 415 {
		t.Fatalf("an empty body without Content-Type (a cross-site form): %d %s", rep.status, rep.raw)
	}
	if rep := call(t, "GET", fmt.Sprintf("%s/v1/orders/%d", r.URL, id), ""); rep.status != 200 || strings.Contains(rep.raw, "K-CANCEL") {
		t.Fatalf("a look-up by id shows the key: %d %s", rep.status, rep.raw)
	}
	if rep := call(t, "GET", r.URL+"/v1/products/SEAM-CA/orders?limit=500", ""); rep.status != 200 || strings.Contains(rep.raw, "K-CANCEL") {
		t.Fatalf("the orders page shows the key: %d %s", rep.status, rep.raw)
	}
	if a := auditOf(t, r, "SEAM-CA"); a.Cancelled != 0 || a.Stock != 8 {
		t.Fatalf("refused cancellations changed the stock: %+v", a)
	}
	if rep := call(t, "POST", url, `{"request_id":"K-CANCEL"}`); rep.status != 200 || rep.body["replayed"] != false {
		t.Fatalf("the key's cancel: %d %s", rep.status, rep.raw)
	}
	cart := call(t, "POST", r.URL+"/v1/orders", `{"items":[{"sku":"SEAM-CA","qty":1},{"sku":"SEAM-CB","qty":1}]}`, "Idempotency-Key", "K-CANCEL-CART")
	orders, _ := cart.body["orders"].([]any)
	if cart.status != 201 || len(orders) != 2 {
		t.Fatalf("cart: %d %s", cart.status, cart.raw)
	}
	for _, o := range orders {
		oid := int64(o.(map[string]any)["id"].(float64))
		rep := call(t, "POST", fmt.Sprintf("%s/v1/orders/%d/cancel", r.URL, oid), `{"request_id":"K-CANCEL-CART"}`)
		if rep.status != 200 {
			t.Fatalf("cancel a cart's order %d with the cart's key: %d %s", oid, rep.status, rep.raw)
		}
	}
	// The admin token stands in for any key.
	other := buy(t, r, "SEAM-CB", 1, "")
	if rep := call(t, "POST", fmt.Sprintf("%s/v1/orders/%d/cancel", r.URL, other.orderID()), `{}`, "Authorization", "Bearer "+adminToken); rep.status != 200 {
		t.Fatalf("an admin's cancel: %d %s", rep.status, rep.raw)
	}
}

// A retry whose key was sold while it waited for the lock is a replay; when its (read-only)
// COMMIT goes unanswered it is still a replay, answered 200 and not counted as a sale. A cart,
// because a one-line sale finds its key in its first round trip and sends no COMMIT for a
// replay (inventory's pipelined sale); a cart's transaction still commits after its look-up.
func TestReplayWithAnUnansweredCommitIsNotASale(t *testing.T) {
	r, proxy, direct := behindDBProxy(t, order.ModeZK)
	const skuA, skuB = "SEAM-REPLAY-A", "SEAM-REPLAY-B"
	resetStock(t, r, skuA, 10)
	resetStock(t, r, skuB, 10)
	// The first cart holds the locks for its work; the retry, sent meanwhile, finds no order
	// before the locks, waits, and finds the first one's orders in its transaction. Its COMMIT,
	// the second of the two, loses its reply.
	var mu sync.Mutex
	commits := 0
	proxy.CutAfterQuery(func(q string) bool {
		if !isCommit(q) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		commits++
		return commits == 2
	}, false)
	r.Srv.SetWorkDelay(500 * time.Millisecond)
	first := make(chan reply, 1)
	go func() { first <- buyCart(t, r, "K-RETRY", skuA, 1, skuB, 1) }()
	waitForHolder(t, r, skuB) // the first cart holds both locks; the retry will not find its orders
	// The retry would wait for the first's holding of the key, and find its orders before the
	// locks: expired (as a holding whose replica was paused past it), it is taken over.
	expireHolding(t, r.DSN, "K-RETRY")
	second := buyCart(t, r, "K-RETRY", skuA, 1, skuB, 1)
	one := <-first
	if one.status != 201 || second.status != 200 || second.body["replayed"] != true || fmt.Sprint(second.body["orders"]) != fmt.Sprint(one.body["orders"]) {
		t.Fatalf("first %d %s; retry %d %s: want 201, then 200 replayed with the same orders", one.status, one.raw, second.status, second.raw)
	}
	mu.Lock()
	cut := commits >= 2
	mu.Unlock()
	if !cut {
		t.Fatalf("the retry sent no COMMIT (%d COMMITs seen): the test did not cut what it means to", commits)
	}
	metrics := call(t, "GET", r.URL+"/metrics", "").raw
	if !strings.Contains(metrics, `zkstock_orders_total{result="created"} 1`) || !strings.Contains(metrics, `zkstock_orders_total{result="replayed"} 1`) {
		t.Fatalf("want one sale and one replay counted:\n%s", grepLines(metrics, "zkstock_orders_total"))
	}
	for _, sku := range []string{skuA, skuB} {
		if a := directAudit(t, direct, sku); a.UnitsSold != 1 || a.Stock != 9 {
			t.Fatalf("audit of %s %+v", sku, a)
		}
	}
}

// A redis-fenced acquisition whose reply is lost after Redis set the lock: the service asks again
// under the same holding name, learns it holds the lock, and sells, instead of leaving a lock
// nobody knows it holds to stall the SKU until it expires. Redis pauses writes for longer than
// the client's read timeout (1 s), so the acquisition's script runs after the client gave up.
func TestRedisFencedLostAcquireReply(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), Password: testenv.RedisAdminPassword()})
	t.Cleanup(func() { _ = rdb.Close() })
	rs := newCluster(t, 2, clusterOpts{Mode: order.ModeRedisFenced, LockTimeout: 8 * time.Second})
	const sku = "SEAM-REDIS-LOST"
	resetStock(t, rs[0], sku, 10)
	ctx := context.Background()
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", "2500", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep := buy(t, rs[0], sku, 1, "")
	if rep.status != 201 {
		t.Fatalf("purchase whose lock reply was lost: %d %s (after %v)", rep.status, rep.raw, time.Since(start))
	}
	if n, err := rdb.Exists(ctx, "zkstock:lock:sku:"+sku).Result(); err != nil || n != 0 {
		t.Fatalf("the lock is still set after the sale: %d %v", n, err)
	}
	if rep := buy(t, rs[1], sku, 1, ""); rep.status != 201 {
		t.Fatalf("next purchase: %d %s", rep.status, rep.raw)
	}
}
