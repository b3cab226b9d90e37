package order_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/order"
)

func buyCart(t testing.TB, r *replica, key string, items ...any) reply {
	var parts []string
	for i := 0; i+1 < len(items); i += 2 {
		parts = append(parts, fmt.Sprintf(`{"sku":%q,"qty":%d}`, items[i], items[i+1]))
	}
	return call(t, "POST", r.URL+"/v1/orders", `{"items":[`+strings.Join(parts, ",")+`]}`, "Idempotency-Key", key)
}

// A cart sells every item or none, answers one order per item with its fencing token, and its key
// covers the whole cart.
func TestCart(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{})[0]
	resetStock(t, r, "CART-A", 10)
	resetStock(t, r, "CART-B", 10)
	rep := buyCart(t, r, "cart-1", "CART-B", 2, "CART-A", 1)
	orders, _ := rep.body["orders"].([]any)
	remaining, _ := rep.body["remaining"].(map[string]any)
	if rep.status != 201 || len(orders) != 2 || remaining["CART-A"] != float64(9) || remaining["CART-B"] != float64(8) {
		t.Fatalf("cart: %d %s", rep.status, rep.raw)
	}
	for i, want := range []string{"CART-B", "CART-A"} {
		o, _ := orders[i].(map[string]any)
		if o["sku"] != want || o["fence_token"] == float64(0) {
			t.Fatalf("order %d: %v, want %s with a fencing token", i, o, want)
		}
	}
	if again := buyCart(t, r, "cart-1", "CART-B", 2, "CART-A", 1); again.status != 200 || again.body["replayed"] != true {
		t.Fatalf("the same cart again: %d %s", again.status, again.raw)
	}
	if other := buyCart(t, r, "cart-1", "CART-B", 3, "CART-A", 1); other.status != 422 || other.code() != "idempotency_key_reused" {
		t.Fatalf("another cart under the key: %d %s", other.status, other.raw)
	}
	short := buyCart(t, r, "", "CART-A", 1, "CART-B", 9)
	if short.status != 409 || short.code() != "out_of_stock" || short.body["sku"] != "CART-B" {
		t.Fatalf("short cart: %d %s", short.status, short.raw)
	}
	if a, b := auditOf(t, r, "CART-A"), auditOf(t, r, "CART-B"); a.Stock != 9 || a.Orders != 1 || b.Stock != 8 || b.Orders != 1 {
		t.Fatalf("the short cart sold something: %+v %+v", a, b)
	}
}

// Bad carts are refused before any lock, and change nothing.
func TestBadCarts(t *testing.T) {
	r := ordertest.Start(t, 1, ordertest.Options{})[0]
	resetStock(t, r, "CART-C", 10)
	held := r.Locks.Stats().Acquisitions // the fleet's barrier
	twentyOne := make([]string, 21)
	for i := range twentyOne {
		twentyOne[i] = fmt.Sprintf(`{"sku":"CART-C%d","qty":1}`, i)
	}
	for name, body := range map[string]string{
		"empty cart":       `{"items":[]}`,
		"21 items":         `{"items":[` + strings.Join(twentyOne, ",") + `]}`,
		"duplicate SKU":    `{"items":[{"sku":"CART-C","qty":1},{"sku":"CART-C","qty":2}]}`,
		"items and sku":    `{"sku":"CART-C","qty":1,"items":[{"sku":"CART-C","qty":1}]}`,
		"items not a list": `{"items":{"sku":"CART-C","qty":1}}`,
		"item without qty": `{"items":[{"sku":"CART-C"}]}`,
		"item qty zero":    `{"items":[{"sku":"CART-C","qty":0}]}`,
		"item qty string":  `{"items":[{"sku":"CART-C","qty":"1"}]}`,
		"item bad SKU":     `{"items":[{"sku":"CART/C","qty":1}]}`,
		"item extra field": `{"items":[{"sku":"CART-C","qty":1,"price":3}]}`,
		"items null":       `{"items":null}`,
	} {
		rep := call(t, "POST", r.URL+"/v1/orders", body)
		if rep.status != 400 || rep.code() != "invalid_request" {
			t.Errorf("%s: %d %s", name, rep.status, rep.raw)
		}
	}
	if a := auditOf(t, r, "CART-C"); a.Stock != 10 || a.Orders != 0 {
		t.Fatalf("audit %+v", a)
	}
	if n := r.Locks.Stats().Acquisitions - held; n != 0 {
		t.Fatalf("bad carts took the lock %d times", n)
	}
}

// Many clients on three replicas buy overlapping carts listed in random orders. Nobody deadlocks
// (every answer is a sale or a sold-out, well within LOCK_TIMEOUT), and every SKU's audit is exact.
func TestOverlappingCartsNeitherDeadlockNorOversell(t *testing.T) {
	skus := []string{"MIX-A", "MIX-B", "MIX-C", "MIX-D", "MIX-E"}
	for _, mode := range []order.LockMode{order.ModeZK, order.ModeZKBatch, order.ModeDBForUpdate, order.ModeDBCAS,
		order.ModeDBLockTable, order.ModeRedis, order.ModeRedisFenced} {
		t.Run(string(mode), func(t *testing.T) {
			const lockTimeout = 10 * time.Second
			rs := ordertest.Start(t, 3, ordertest.Options{Mode: mode, WorkDelay: time.Millisecond, LockTimeout: lockTimeout})
			for _, sku := range skus {
				resetStock(t, rs[0], sku, 30)
			}
			var mu sync.Mutex
			sold := map[string]int64{}
			answers := map[string]int{}
			var slowest time.Duration
			var wg sync.WaitGroup
			for c := 0; c < 48; c++ {
				wg.Add(1)
				go func(c int) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(c), 7))
					picked := rng.Perm(len(skus))[:2+rng.IntN(3)]
					var items []any
					for _, i := range picked {
						items = append(items, skus[i], 1+rng.IntN(2))
					}
					key := "" // half the clients send a key (the service looks it up), half let the service make one
					if c%2 == 0 {
						key = fmt.Sprintf("mix-%s-%d", mode, c)
					}
					start := time.Now()
					rep := buyCart(t, rs[c%3], key, items...)
					took := time.Since(start)
					mu.Lock()
					defer mu.Unlock()
					slowest = max(slowest, took)
					answers[fmt.Sprintf("%d %s", rep.status, rep.code())]++
					if rep.status == 201 {
						for i := 0; i+1 < len(items); i += 2 {
							sold[items[i].(string)] += int64(items[i+1].(int))
						}
					}
				}(c)
			}
			wg.Wait()
			raw, _ := json.Marshal(answers)
			t.Logf("%s: answers %s, slowest %v", mode, raw, slowest.Round(time.Millisecond))
			for a := range answers {
				if a != "201 " && a != "409 out_of_stock" {
					t.Fatalf("answers %s: want only sales and sold-outs", raw)
				}
			}
			if slowest >= lockTimeout {
				t.Fatalf("a cart took %v: a deadlock broken by the timeout", slowest)
			}
			for _, sku := range skus {
				a := auditOf(t, rs[0], sku)
				if a.Oversold != 0 || a.LostUpdates != 0 || a.UnitsSold != sold[sku] || a.Stock != 30-sold[sku] {
					t.Fatalf("%s: audit %+v, sold %d by the answers", sku, a, sold[sku])
				}
			}
		})
	}
}
