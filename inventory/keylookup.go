package inventory

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// StocksThenKeysInUse reads the stocks of skus (Stocks) and then, in the same round trip, which of
// keys are in use (KeysInUse): the look-up's read is made after the stocks' read, as a sold-out
// answer given before a key is held needs (sale's soldout_unheld.go).
func (s *Store) StocksThenKeysInUse(ctx context.Context, skus, keys []string) (map[string]int64, map[string]bool, error) {
	first := keys[:min(len(keys), keysPerLookup)]
	if len(skus) == 0 || len(first) == 0 {
		return nil, nil, fmt.Errorf("inventory: stocks then keys: %d SKUs and %d keys, want some of each", len(skus), len(keys))
	}
	list := func(n int) string { return "?" + strings.Repeat(", ?", n-1) }
	q := "SELECT sku, stock FROM products WHERE sku IN (" + list(len(skus)) + "); " +
		"SELECT request_id FROM orders WHERE request_id IN (" + list(len(first)) + ") UNION " +
		"SELECT request_id FROM key_attempts WHERE request_id IN (" + list(len(first)) + ") AND expires_at > NOW(6)"
	args := make([]any, 0, len(skus)+2*len(first))
	for _, sku := range skus {
		args = append(args, sku)
	}
	for range 2 {
		for _, k := range first {
			args = append(args, k)
		}
	}
	stocks, inUse, err := s.stocksThenKeys(ctx, q, args)
	if err != nil {
		return nil, nil, fmt.Errorf("inventory: stocks then keys: %w", err)
	}
	if rest := keys[len(first):]; len(rest) > 0 {
		more, err := s.KeysInUse(ctx, rest)
		if err != nil {
			return nil, nil, err
		}
		for k := range more {
			inUse[k] = true
		}
	}
	return stocks, inUse, nil
}

// stocksThenKeys runs StocksThenKeysInUse's two statements and reads their rows.
func (s *Store) stocksThenKeys(ctx context.Context, q string, args []any) (map[string]int64, map[string]bool, error) {
	rows, err := s.sqlDB.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	stocks, inUse := map[string]int64{}, map[string]bool{}
	for rows.Next() {
		var sku string
		var stock int64
		if err := rows.Scan(&sku, &stock); err != nil {
			return nil, nil, err
		}
		stocks[sku] = stock
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if !rows.NextResultSet() {
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
		return nil, nil, errors.New("no look-up of the keys after the stocks")
	}
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			return nil, nil, err
		}
		inUse[key] = true
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return stocks, inUse, rows.Close()
}
