package sale

import (
	"context"
	"sync"
	"sync/atomic"
)

// maxKnownSKUs bounds the SKUs a replica remembers as existing; past it, the others are read each
// time.
const maxKnownSKUs = 100_000

// knownSKUs remembers the SKUs this replica has seen exist, each with its stock gauge's child, so
// that a purchase of a known SKU asks the database nothing before its lock and builds no metric
// labels. Products are never deleted (PUT /admin/products creates or resets), so a SKU once seen
// stays. Even if one were removed behind the service's back, nothing would be sold wrongly: the
// locked transaction reads the product and answers unknown_sku; only the lock path would be made.
type knownSKUs struct {
	m sync.Map // sku -> Gauge
	n atomic.Int64
}

// productExists is the check before the lock: nil when the SKU exists (remembered, or read now),
// inventory.ErrUnknownSKU when it does not.
func (e *Engine) productExists(ctx context.Context, sku string) error {
	if _, ok := e.known.m.Load(sku); ok {
		return nil
	}
	if _, err := e.store().Product(ctx, sku); err != nil {
		return err
	}
	e.rememberSKU(sku)
	return nil
}

// rememberSKU notes that sku exists.
func (e *Engine) rememberSKU(sku string) {
	if _, ok := e.known.m.Load(sku); ok || e.known.n.Load() >= maxKnownSKUs {
		return
	}
	if _, loaded := e.known.m.LoadOrStore(sku, e.cfg.Metrics.Stock(sku)); !loaded {
		e.known.n.Add(1)
	}
}

// StockGauge is the SKU's child of the stock gauge (Metrics.Stock).
func (e *Engine) StockGauge(sku string) Gauge {
	if g, ok := e.known.m.Load(sku); ok {
		return g.(Gauge)
	}
	return e.cfg.Metrics.Stock(sku)
}
