package inventory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/tcpproxy"
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

// An acquisition its caller gives up on while its INSERT is on the way leaves no lock behind: the
// server commits the INSERT after the client stopped listening, and that row blocked the lock for
// its whole TTL. A fresh acquisition of the same lock succeeds at once instead.
func TestTableLockCancelledAcquisitionLeavesNoRow(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	direct := openStoreAt(t, dsn)
	p, proxied := tcpproxy.ProxiedDSN(t, dsn, nil)
	slow := openStoreAt(t, proxied)
	const ttl = time.Minute
	p.SetDelay(400 * time.Millisecond) // each way: the INSERT reaches the server after its caller left
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		held, err := slow.AcquireTableLock(ctx, "sku:CANCEL", ttl, time.Millisecond)
		cancel()
		if !errors.Is(err, inventory.ErrLockTimeout) {
			if err == nil {
				_ = held.Release(context.Background())
			}
			t.Fatalf("acquisition %d, given up after 150 ms on a link 800 ms long: %v, want ErrLockTimeout", i, err)
		}
	}
	p.SetDelay(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a sixth of the TTL
	defer cancel()
	held, err := direct.AcquireTableLock(ctx, "sku:CANCEL", ttl, time.Millisecond)
	if err != nil {
		t.Fatalf("the lock after cancelled acquisitions: %v (a row one of them left holds it for the TTL, %v)", err, ttl)
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
