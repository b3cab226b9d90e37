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
	return s.lookUpKeys(ctx, "SELECT DISTINCT request_id FROM orders WHERE request_id IN ?", 1, keys)
}

// KeysInUse says which of the purchase keys hold an order or an unexpired holding of another
// attempt (HoldKey) now: a key it does not return held neither as of its read, so that a purchase
// under it that holds nothing itself can be answered from a read made before (a sold-out product:
// the answer rests on that read, and no attempt under the key was in flight at it or had sold).
func (s *Store) KeysInUse(ctx context.Context, keys []string) (map[string]bool, error) {
	return s.lookUpKeys(ctx, "SELECT request_id FROM orders WHERE request_id IN ? UNION "+
		"SELECT request_id FROM key_attempts WHERE request_id IN ? AND expires_at > NOW(6)", 2, keys)
}

// lookUpKeys runs q, whose uses IN lists each take the keys, over as many statements as the keys
// need, and returns the keys its rows name.
func (s *Store) lookUpKeys(ctx context.Context, q string, uses int, keys []string) (map[string]bool, error) {
	taken := make(map[string]bool)
	for len(keys) > 0 {
		n := min(len(keys), keysPerLookup)
		args := make([]any, uses)
		for i := range args {
			args[i] = keys[:n]
		}
		rows, err := s.db.WithContext(ctx).Raw(q, args...).Rows()
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
