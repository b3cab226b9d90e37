package order_test

import (
	"fmt"
	"testing"
)

// An order can be looked up by id and by the key that produced it, on any replica, and a
// product's orders are paged newest last with a cursor that ends.
func TestOrderLookups(t *testing.T) {
	rs := newCluster(t, 2, clusterOpts{})
	sku := "LOOKUP-1"
	resetStock(t, rs[0], sku, 10)
	var ids []int64
	for i := range 5 {
		r := buy(t, rs[i%2], sku, 1, fmt.Sprintf("lookup-%d", i))
		if r.status != 201 {
			t.Fatalf("purchase: %d %s", r.status, r.raw)
		}
		ids = append(ids, r.orderID())
	}

	byID := call(t, "GET", fmt.Sprintf("%s/v1/orders/%d", rs[1].URL, ids[2]), "")
	if byID.status != 200 || byID.orderID() != ids[2] {
		t.Fatalf("order %d by id: %d %s", ids[2], byID.status, byID.raw)
	}
	byKey := call(t, "GET", rs[0].URL+"/v1/orders?request_id=lookup-3", "")
	if byKey.status != 200 || byKey.orderID() != ids[3] {
		t.Fatalf("order by key: %d %s", byKey.status, byKey.raw)
	}
	if o := byKey.body["order"].(map[string]any); o["sku"] != sku || o["request_id"] != "lookup-3" {
		t.Fatalf("order by key: %s", byKey.raw)
	}

	var seen []int64
	after := "0"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("the cursor never ended")
		}
		r := call(t, "GET", rs[1].URL+"/v1/products/"+sku+"/orders?limit=2&after="+after, "")
		if r.status != 200 {
			t.Fatalf("page after %s: %d %s", after, r.status, r.raw)
		}
		for _, o := range r.body["orders"].([]any) {
			seen = append(seen, int64(o.(map[string]any)["id"].(float64)))
		}
		next, ok := r.body["next_after"].(float64)
		if !ok {
			break
		}
		after = fmt.Sprint(int64(next))
	}
	if fmt.Sprint(seen) != fmt.Sprint(ids) {
		t.Fatalf("pages gave %v, want every order oldest first %v", seen, ids)
	}
	if r := call(t, "GET", rs[0].URL+"/v1/products/"+sku+"/orders", ""); r.status != 200 || len(r.body["orders"].([]any)) != 5 || r.body["next_after"] != nil {
		t.Fatalf("default page: %d %s", r.status, r.raw)
	}
}
