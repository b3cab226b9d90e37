package inventory_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/zkstock/zkstock/inventory"
)

// KeysWithOrders returns exactly the keys that hold an order, over more keys than one statement
// asks for, and tells keys apart by case as PurchaseByKey does.
func TestKeysWithOrders(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	mustReset(t, s, "KEYS-1", 10)
	for _, key := range []string{"KL-sold", "KL-last"} {
		if _, err := s.Deduct(ctx, inventory.Purchase{SKU: "KEYS-1", Qty: 1, RequestID: key}, inventory.Unsafe, inventory.Hooks{}); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{"KL-sold", "kl-sold", "KL-never"}
	for i := range 1200 {
		keys = append(keys, fmt.Sprintf("KL-none-%d", i))
	}
	keys = append(keys, "KL-last")
	taken, err := s.KeysWithOrders(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(taken) != 2 || !taken["KL-sold"] || !taken["KL-last"] {
		t.Fatalf("keys with orders %v; want KL-sold and KL-last only", taken)
	}
	for _, key := range keys {
		_, found, err := s.PurchaseByKey(ctx, inventory.Purchase{SKU: "KEYS-1", Qty: 1, RequestID: key})
		if err != nil || found != taken[key] {
			t.Fatalf("key %q: PurchaseByKey found %v (%v), KeysWithOrders %v", key, found, err, taken[key])
		}
	}
}
