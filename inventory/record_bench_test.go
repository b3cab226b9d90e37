package inventory_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// BenchmarkBatchOf64 is a full batch of zk-batch (64 purchases of one SKU, each under a key) in
// one transaction, its orders inserted by one INSERT ... RETURNING or by one statement each:
//
//	scripts/servers.sh run --no-ensemble -- go test -run '^$' -bench BatchOf64 -benchtime 300x ./inventory
func BenchmarkBatchOf64(b *testing.B) {
	for _, returning := range []bool{true, false} {
		b.Run(fmt.Sprintf("returning=%v", returning), func(b *testing.B) {
			s := openStoreB(b)
			s.SetInsertReturningForTest(returning)
			ctx := context.Background()
			if _, err := s.Reset(ctx, "B-1", int64(64*(b.N+1))); err != nil {
				b.Fatal(err)
			}
			items := make([]inventory.BatchItem, 64)
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				for i := range items {
					items[i] = inventory.BatchItem{Purchase: inventory.Purchase{SKU: "B-1", Qty: 1, RequestID: fmt.Sprintf("b-%v-%d-%d", returning, n, i), Token: 1}}
				}
				if err := s.DeductBatch(ctx, "B-1", inventory.Fence{Token: 1}, items, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func openStoreB(b *testing.B) *inventory.Store {
	b.Helper()
	ctx := context.Background()
	s, err := inventory.Open(ctx, testenv.MySQLDatabase(b), inventory.PoolOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	return s
}
