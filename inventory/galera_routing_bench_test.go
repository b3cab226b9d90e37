package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// BenchmarkGaleraRouting weighs the two ways a fleet could route its writes on the cluster of make
// test-galera: every purchase to one writer (what inventory.Cluster does), or each SKU's to a node
// of its own (a hash of the SKU), so that the three nodes share the writes. Purchases of 8 SKUs,
// fenced, many at once, one unit each; reported per route: the time per purchase and the share
// that failed certification (error 1213 at COMMIT, ErrRolledBack). Run it with
//
//	ZKSTOCK_GALERA=1 scripts/servers.sh run --no-ensemble --galera -- go test -run '^$' -bench GaleraRouting -benchtime 2000x -count 3 ./inventory
func BenchmarkGaleraRouting(b *testing.B) {
	ctx := context.Background()
	nodes := testenv.GaleraDatabase(b)
	stores := make([]*inventory.Store, len(nodes))
	for i, dsn := range nodes {
		s, err := inventory.Open(ctx, dsn, inventory.PoolOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		stores[i] = s
	}
	if err := stores[0].Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	skus := []string{"R-1", "R-2", "R-3", "R-4", "R-5", "R-6", "R-7", "R-8"}
	routes := map[string]func(sku string) *inventory.Store{
		"one-writer": func(string) *inventory.Store { return stores[0] },
		"per-sku": func(sku string) *inventory.Store {
			h := fnv.New32a()
			_, _ = h.Write([]byte(sku))
			return stores[h.Sum32()%uint32(len(stores))]
		},
	}
	run := time.Now().UnixNano() // keys unique across the benchmark's repeated runs
	for _, name := range []string{"one-writer", "per-sku"} {
		route := routes[name]
		b.Run("route="+name, func(b *testing.B) {
			for _, sku := range skus {
				if _, err := stores[0].Reset(ctx, sku, int64(b.N)+1); err != nil {
					b.Fatal(err)
				}
			}
			run++
			var next, rolledBack atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					sku := skus[i%int64(len(skus))]
					p := inventory.Purchase{SKU: sku, Qty: 1, RequestID: fmt.Sprintf("r%d-%s-%d", run, name, i), NewKey: true, Replica: "bench", Token: 1}
					_, err := route(sku).Deduct(ctx, p, inventory.Fenced, inventory.Hooks{})
					switch {
					case errors.Is(err, inventory.ErrRolledBack):
						rolledBack.Add(1)
					case err != nil:
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(rolledBack.Load())/float64(b.N), "rolledback/op")
		})
	}
}
