package inventory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// Two replicas whose clocks disagree must not both hold a table lock. The expiry was written with
// the acquirer's clock and judged with the waiter's: a waiter a minute ahead, or a holder a minute
// behind, saw a 30 s lock expire at once and took it over. The database's clock judges now.
func TestTableLockIgnoresTheReplicasClocks(t *testing.T) {
	for _, c := range []struct {
		name           string
		holder, waiter time.Duration // each one's clock, off by
	}{
		{"waiter ahead", 0, time.Minute},
		{"holder behind", -time.Minute, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := testenv.MySQLDatabase(t)
			holder, waiter := openStoreAt(t, dsn), openStoreAt(t, dsn)
			holder.SkewClockForTest(c.holder)
			waiter.SkewClockForTest(c.waiter)
			ctx := context.Background()
			held, err := holder.AcquireTableLock(ctx, "sku:SKEW", 30*time.Second, time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			if other, err := waiter.AcquireTableLock(short, "sku:SKEW", 30*time.Second, time.Millisecond); !errors.Is(err, inventory.ErrLockTimeout) {
				if err == nil {
					_ = other.Release(ctx)
				}
				t.Fatalf("a second holder of a lock held for 30 s: %v, want ErrLockTimeout", err)
			}
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
