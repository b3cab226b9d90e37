package inventory

import (
	"context"
	"fmt"
)

// Products lists up to limit products, by SKU.
func (s *Store) Products(ctx context.Context, limit int) ([]Product, error) {
	ps := []Product{}
	if err := s.db.WithContext(ctx).Order("sku").Limit(limit).Find(&ps).Error; err != nil {
		return nil, fmt.Errorf("inventory: products: %w", err)
	}
	return ps, nil
}

// Stocks reads the committed stock of each of skus in one statement, outside any transaction: an
// autocommit read sees every change committed before it began, so each value was true at some
// moment between the call and its return. SKUs that do not exist are absent from the map.
func (s *Store) Stocks(ctx context.Context, skus []string) (map[string]int64, error) {
	rows, err := s.db.WithContext(ctx).Raw("SELECT sku, stock FROM products WHERE sku IN ?", skus).Rows()
	if err != nil {
		return nil, fmt.Errorf("inventory: stocks: %w", err)
	}
	defer rows.Close()
	stocks := make(map[string]int64, len(skus))
	for rows.Next() {
		var sku string
		var stock int64
		if err := rows.Scan(&sku, &stock); err != nil {
			return nil, fmt.Errorf("inventory: stocks: %w", err)
		}
		stocks[sku] = stock
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("inventory: stocks: %w", err)
	}
	return stocks, nil
}
