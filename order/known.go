package order

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// maxKnownSKUs bounds the SKUs a replica remembers as existing; past it, the rest are read each
// time, as every SKU was before.
const maxKnownSKUs = 100_000

// knownSKUs remembers the SKUs this replica has seen exist, each with its stock gauge's child, so
// that a purchase of a known SKU asks the database nothing before its lock and builds no metric
// labels. Products are never deleted (PUT /admin/products creates or resets), so a SKU once seen
// stays. Even if one were removed behind the service's back, nothing would be sold wrongly: the
// locked transaction reads the product and answers unknown_sku; only the lock path would be made.
type knownSKUs struct {
	m sync.Map // sku -> prometheus.Gauge
	n atomic.Int64
}

// productExists is the check before the lock: nil when the SKU exists (remembered, or read now),
// inventory.ErrUnknownSKU when it does not.
func (s *Server) productExists(ctx context.Context, sku string) error {
	if _, ok := s.known.m.Load(sku); ok {
		return nil
	}
	if _, err := s.store.Product(ctx, sku); err != nil {
		return err
	}
	s.rememberSKU(sku)
	return nil
}

// rememberSKU notes that sku exists.
func (s *Server) rememberSKU(sku string) {
	if _, ok := s.known.m.Load(sku); ok || s.known.n.Load() >= maxKnownSKUs {
		return
	}
	if _, loaded := s.known.m.LoadOrStore(sku, s.metrics.stock.WithLabelValues(sku)); !loaded {
		s.known.n.Add(1)
	}
}

// stockGauge is the SKU's child of zkstock_stock.
func (s *Server) stockGauge(sku string) prometheus.Gauge {
	if g, ok := s.known.m.Load(sku); ok {
		return g.(prometheus.Gauge)
	}
	return s.metrics.stock.WithLabelValues(sku)
}
