package inventory

import (
	"context"
	"fmt"
)

// keysPerLookup bounds the keys one statement of KeysWithOrders asks for.
const keysPerLookup = 500

// KeysWithOrders says which of the purchase keys hold an order now: the batched form of the look-up
// PurchaseByKey starts with, for many purchases answered at once (a sold-out product's queue sent
// away). A key it does not return holds no order as of its read; a key it returns is looked up
// with PurchaseByKey for its answer.
func (s *Store) KeysWithOrders(ctx context.Context, keys []string) (map[string]bool, error) {
	taken := make(map[string]bool)
	for len(keys) > 0 {
		n := min(len(keys), keysPerLookup)
		rows, err := s.db.WithContext(ctx).Raw("SELECT DISTINCT request_id FROM orders WHERE request_id IN ?", keys[:n]).Rows()
		if err != nil {
			return nil, fmt.Errorf("inventory: look up %d keys: %w", n, err)
		}
		for rows.Next() {
			var key string
			if err := rows.Scan(&key); err != nil {
				rows.Close()
				return nil, fmt.Errorf("inventory: look up %d keys: %w", n, err)
			}
			taken[key] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("inventory: look up %d keys: %w", n, err)
		}
		keys = keys[n:]
	}
	return taken, nil
}
