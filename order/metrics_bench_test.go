package order

import (
	"database/sql"
	"fmt"
	"runtime"
	runtimemetrics "runtime/metrics"
	"testing"

	"github.com/zkstock/zkstock/dlock"
)

// The live heap one SKU's stock gauge series keeps (make footprint counts it in what a catalogue
// leaves behind): go test -run '^$' -bench StockGauge ./order
func BenchmarkStockGaugeSeries(b *testing.B) {
	m, err := newMetrics(func() dlock.Stats { return dlock.Stats{} }, func() int64 { return 0 }, func() sql.DBStats { return sql.DBStats{} })
	if err != nil {
		b.Fatal(err)
	}
	skus := make([]string, b.N)
	for i := range skus {
		skus[i] = fmt.Sprintf("FOOT-K3J9-%d", i)
	}
	before := liveHeap()
	b.ResetTimer()
	for _, sku := range skus {
		m.stock.WithLabelValues(sku).Set(1)
	}
	b.StopTimer()
	b.ReportMetric(float64(liveHeap()-before)/float64(b.N), "live-B/series")
	runtime.KeepAlive(m)
}

// liveHeap collects the garbage and says how many bytes the collection marked live (the footprint
// test reads it too, as LiveHeapBytes).
func liveHeap() int64 {
	runtime.GC()
	s := []runtimemetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	runtimemetrics.Read(s)
	return int64(s[0].Value.Uint64())
}
