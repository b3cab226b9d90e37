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
