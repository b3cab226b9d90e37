package inventory

import "context"

// InsertLegacyCartForTest records a cart's orders as the service did before heads and digests:
// every item under KEY#SKU.
func (s *Store) InsertLegacyCartForTest(ctx context.Context, c Cart) error {
	orders := make([]Order, len(c.Items))
	for i, it := range c.Items {
		key := ItemKey(c.RequestID, it.SKU)
		orders[i] = Order{SKU: it.SKU, Qty: it.Qty, Replica: "legacy", RequestID: &key}
	}
	return s.db.WithContext(ctx).Create(&orders).Error
}
