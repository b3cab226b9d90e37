package inventory_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// A key is held by one attempt at a time; another is refused until the holding is released or
// expires by the database's clock, when it is taken over; a release deletes only its own holding.
func TestKeyHoldingIsExclusiveUntilReleasedOrExpired(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	hold := func(attempt string, d time.Duration) bool {
		t.Helper()
		held, _, err := s.HoldKey(ctx, "K1", attempt, "r1", d, "K1")
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	if !hold("a", 700*time.Millisecond) {
		t.Fatal("a fresh key was not held")
	}
	if hold("b", time.Minute) {
		t.Fatal("a key held by another attempt, unexpired, was held again")
	}
	time.Sleep(800 * time.Millisecond)
	if !hold("b", time.Minute) {
		t.Fatal("an expired holding was not taken over")
	}
	if err := s.ReleaseKeys(ctx, []inventory.HeldKey{{Key: "K1", Attempt: "a"}}); err != nil {
		t.Fatal(err)
	}
	if hold("c", time.Minute) {
		t.Fatal("the first attempt's late release deleted the holding that took it over")
	}
	if err := s.ReleaseKeys(ctx, []inventory.HeldKey{{Key: "K1", Attempt: "b"}, {Key: "k1", Attempt: "none"}}); err != nil {
		t.Fatal(err)
	}
	if !hold("c", time.Minute) {
		t.Fatal("a released key was not held")
	}
	if !hold("c", time.Minute) {
		t.Fatal("an attempt's own holding, sent again (its first reply lost), was not held")
	}
	if held, made, err := s.HoldKey(ctx, "k1", "e", "r1", time.Minute, "k1"); err != nil || !held || made {
		t.Fatalf("keys differing in case are distinct keys: held %v, made %v, %v", held, made, err)
	}
	if n, err := s.SweepKeys(ctx, 0, 100); err != nil || n != 0 {
		t.Fatalf("sweep of unexpired holdings: %d, %v", n, err)
	}
}
