package inventory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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

// KeysInUse returns the keys that hold an order or another attempt's unexpired holding, and
// neither a key whose holding has expired nor one whose holding was released.
func TestKeysInUse(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	mustReset(t, s, "KEYS-2", 10)
	if _, err := s.Deduct(ctx, inventory.Purchase{SKU: "KEYS-2", Qty: 1, RequestID: "KU-sold"}, inventory.Unsafe, inventory.Hooks{}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct {
		key  string
		hold time.Duration
	}{{"KU-held", time.Minute}, {"KU-expired", time.Millisecond}, {"KU-released", time.Minute}} {
		if held, _, err := s.HoldKey(ctx, h.key, "attempt-1", "r1", h.hold); err != nil || !held {
			t.Fatalf("hold %s: held %v, %v", h.key, held, err)
		}
	}
	if err := s.ReleaseKeys(ctx, []inventory.HeldKey{{Key: "KU-released", Attempt: "attempt-1"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // KU-expired's holding ends by the database's clock
	keys := []string{"KU-sold", "ku-sold", "KU-held", "KU-expired", "KU-released", "KU-never"}
	for i := range 600 {
		keys = append(keys, fmt.Sprintf("KU-none-%d", i))
	}
	inUse, err := s.KeysInUse(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(inUse) != 2 || !inUse["KU-sold"] || !inUse["KU-held"] {
		t.Fatalf("keys in use %v; want KU-sold (an order) and KU-held (a holding) only", inUse)
	}
	// The same look-up after a read of the stocks, in one round trip (the keys past the first
	// statement's looked up after it).
	stocks, inUse, err := s.StocksThenKeysInUse(ctx, []string{"KEYS-2", "KEYS-NONE"}, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(stocks) != 1 || stocks["KEYS-2"] != 9 {
		t.Errorf("stocks %v; want KEYS-2's 9 only", stocks)
	}
	if len(inUse) != 2 || !inUse["KU-sold"] || !inUse["KU-held"] {
		t.Errorf("keys in use after the stocks %v; want KU-sold and KU-held only", inUse)
	}
	if _, inUse, err := s.StocksThenKeysInUse(ctx, []string{"KEYS-2"}, append(keys[6:], "KU-held")); err != nil || len(inUse) != 1 || !inUse["KU-held"] {
		t.Errorf("a key in use past the first statement's: %v, %v; want KU-held", inUse, err)
	}
}
