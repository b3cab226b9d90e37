package inventory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkstock/zkstock/inventory"
)

// The fence keeps a mark per issuer and an epoch: a holder is refused only by a newer holder of
// its own issuer, and the writes of a SKU, whoever issued their tokens, carry (epoch, token) pairs
// that strictly grow.
func TestOneTokenSpaceAcrossIssuers(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	const sku = "FENCE-1"
	mustReset(t, s, sku, 100)
	zk, redis := inventory.IssuerZooKeeper, inventory.IssuerRedis
	steps := []struct {
		issuer inventory.Issuer
		token  int64
		stale  bool
	}{
		{zk, 4_300_000_100, false},
		{redis, 1, false}, // far below ZooKeeper's tokens: another issuer, not stale
		{redis, 2, false},
		{zk, 4_300_000_102, false},
		{zk, 4_300_000_101, true}, // below its own issuer's mark: a holder whose lock was handed on
		{redis, 1, true},
		{redis, 3, false},
		{zk, 4_300_000_102, false}, // the same holder writing again
	}
	type pair struct{ epoch, token int64 }
	var last pair
	for i, st := range steps {
		_, err := s.Deduct(ctx, inventory.Purchase{SKU: sku, Qty: 1, Issuer: st.issuer, Token: st.token}, inventory.Fenced, inventory.Hooks{})
		if st.stale != errors.Is(err, inventory.ErrStaleToken) || (!st.stale && err != nil) {
			t.Fatalf("step %d (%s %d): %v, want stale=%v", i, st.issuer, st.token, err, st.stale)
		}
		p, err := s.Product(ctx, sku)
		if err != nil {
			t.Fatal(err)
		}
		if st.stale {
			continue
		}
		cur := pair{p.FenceEpoch, p.Mark(st.issuer)}
		if p.FenceIssuer != st.issuer.String() || cur.token != st.token {
			t.Fatalf("step %d: fence %+v", i, p)
		}
		if i > 0 && !(cur.epoch > last.epoch || (cur.epoch == last.epoch && cur.token >= last.token)) {
			t.Fatalf("step %d: (epoch, token) went from %v to %v", i, last, cur)
		}
		last = cur
	}
	if a := audit(t, s, sku); a.UnitsSold != 6 || a.LostUpdates != 0 {
		t.Fatalf("audit %+v", a)
	}
}

// After a wipe of the lock service's data its tokens start again below the mark; the admin lowers
// the mark, and the epoch moves so that the writes after it still order after the ones before.
func TestLowerFence(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	mustReset(t, s, "FENCE-2", 10)
	mustReset(t, s, "FENCE-3", 10)
	for _, sku := range []string{"FENCE-2", "FENCE-3"} {
		if _, err := s.Deduct(ctx, inventory.Purchase{SKU: sku, Qty: 1, Token: 9_000_000_000}, inventory.Fenced, inventory.Hooks{}); err != nil {
			t.Fatal(err)
		}
	}
	fresh := inventory.Purchase{SKU: "FENCE-2", Qty: 1, Token: 42}
	if _, err := s.Deduct(ctx, fresh, inventory.Fenced, inventory.Hooks{}); !errors.Is(err, inventory.ErrStaleToken) {
		t.Fatalf("a token of the wiped service: %v, want ErrStaleToken", err)
	}
	before, _ := s.Product(ctx, "FENCE-2")
	n, err := s.LowerFence(ctx, inventory.IssuerZooKeeper, 0, "FENCE-2")
	if err != nil || n != 1 {
		t.Fatalf("lower one: %d %v", n, err)
	}
	if p, _ := s.Product(ctx, "FENCE-3"); p.FenceToken != 9_000_000_000 {
		t.Fatalf("lowering FENCE-2 touched FENCE-3: %+v", p)
	}
	if _, err := s.Deduct(ctx, fresh, inventory.Fenced, inventory.Hooks{}); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Product(ctx, "FENCE-2")
	if after.FenceEpoch <= before.FenceEpoch || after.FenceToken != 42 {
		t.Fatalf("fence before %+v, after %+v: want a later epoch", before, after)
	}
	if n, err := s.LowerFence(ctx, inventory.IssuerZooKeeper, 0, ""); err != nil || n != 2 {
		t.Fatalf("lower all: %d %v", n, err)
	}
}

// A cart short of its second item names that item in every mode, CAS included, whose conditional
// claims have already taken the first item's last unit when the second falls short (Porcupine
// found db-cas carts short of B answered as short of A).
func TestCartNamesItsShortItemInEveryMode(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	for _, mode := range []inventory.Mode{inventory.Fenced, inventory.Unfenced, inventory.Unsafe, inventory.ForUpdate, inventory.CAS} {
		t.Run(mode.String(), func(t *testing.T) {
			a, b := "SHORT-A-"+mode.String(), "SHORT-B-"+mode.String()
			mustReset(t, s, a, 1)
			mustReset(t, s, b, 0)
			cart := inventory.Cart{Items: []inventory.CartItem{{SKU: a, Qty: 1}, {SKU: b, Qty: 1}}, RequestID: "short-" + mode.String(),
				Tokens: map[string]int64{a: 1, b: 1}}
			_, err := s.DeductCart(ctx, cart, mode, inventory.Hooks{})
			var short *inventory.ShortError
			if !errors.As(err, &short) || short.SKU != b {
				t.Fatalf("%v, want short of %s", err, b)
			}
			if got := audit(t, s, a); got.Stock != 1 || got.Orders != 0 {
				t.Fatalf("the refused cart changed %s: %+v", a, got)
			}
		})
	}
}

// Carts recorded before heads were (only KEY#SKU orders, no digest) are replayed, and a cart
// whose head order an admin reset deleted is refused as a reused key, not answered "retry"
// forever (the reviewer's upgrade finding).
func TestCartsRecordedBeforeHeadsAndAfterAReset(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	for _, sku := range []string{"LEG-A", "LEG-B"} {
		mustReset(t, s, sku, 10)
	}
	legacy := inventory.Cart{Items: []inventory.CartItem{{SKU: "LEG-A", Qty: 1}, {SKU: "LEG-B", Qty: 2}}, RequestID: "legacy"}
	if err := s.InsertLegacyCartForTest(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	res, err := s.DeductCart(ctx, legacy, inventory.Unfenced, inventory.Hooks{})
	if err != nil || !res.Replayed || len(res.Orders) != 2 {
		t.Fatalf("a legacy cart again: %+v, %v; want its replay", res, err)
	}
	cart := inventory.Cart{Items: []inventory.CartItem{{SKU: "LEG-A", Qty: 1}, {SKU: "LEG-B", Qty: 1}}, RequestID: "reset-head"}
	if _, err := s.DeductCart(ctx, cart, inventory.Unfenced, inventory.Hooks{}); err != nil {
		t.Fatal(err)
	}
	mustReset(t, s, "LEG-A", 10) // deletes the head order (LEG-A sorts first)
	if _, err := s.DeductCart(ctx, cart, inventory.Unfenced, inventory.Hooks{}); !errors.Is(err, inventory.ErrKeyReused) {
		t.Fatalf("a cart whose head was reset: %v, want ErrKeyReused", err)
	}
}
