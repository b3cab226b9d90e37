package order_test

import (
	"sync"
	"testing"
)

// ZooKeeper paths are case-sensitive, so "case-1" and "CASE-1" are two locks. The database must
// agree that they are two products; a case-insensitive collation (MariaDB's and MySQL 8's
// default) let a purchase of "case-1" take the lock of "case-1" and sell "CASE-1"'s stock beside
// a holder of "CASE-1"'s lock. The fuzzer found it as a stale fencing token.
func TestSKUsAndKeysAreCaseSensitive(t *testing.T) {
	rs := newCluster(t, 2, clusterOpts{})
	const sku = "CASE-1"
	resetStock(t, rs[0], sku, 40)

	if r := buy(t, rs[0], "case-1", 1, ""); r.status != 404 || r.code() != "unknown_sku" {
		t.Fatalf("a purchase of case-1 when only CASE-1 exists: %s %s, want 404 unknown_sku", r.codeLine(), r.raw)
	}

	// Both spellings at once, from two replicas: every purchase either sells CASE-1 under its own
	// lock or is refused; none is refused for a stale token, and the audit stays exact.
	var wg sync.WaitGroup
	codes := make(chan string, 40)
	for i := range 40 {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			spelling := sku
			if i%2 == 1 {
				spelling = "Case-1"
			}
			codes <- buy(t, rs[i%2], spelling, 1, "").codeLine()
		}(i)
	}
	wg.Wait()
	close(codes)
	count := map[string]int{}
	for c := range codes {
		count[c]++
	}
	if count["201 "] != 20 || count["404 unknown_sku"] != 20 {
		t.Fatalf("answers %v, want 20 sold (CASE-1) and 20 unknown (Case-1)", count)
	}
	if a := auditOf(t, rs[1], sku); a.Stock != 20 || a.UnitsSold != 20 || a.Oversold != 0 || a.LostUpdates != 0 {
		t.Fatalf("audit %+v", a)
	}

	// Idempotency keys that differ in case are different keys: neither replays the other.
	first := buy(t, rs[0], sku, 1, "Key-Case")
	second := buy(t, rs[1], sku, 2, "key-case")
	if first.status != 201 || second.status != 201 || first.orderID() == second.orderID() {
		t.Fatalf("keys Key-Case and key-case: %s %s / %s %s, want two new orders", first.codeLine(), first.raw, second.codeLine(), second.raw)
	}
	if a := auditOf(t, rs[0], sku); a.Stock != 17 || a.Orders != 22 {
		t.Fatalf("audit after the keyed purchases %+v", a)
	}
}
