package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// BatchItem is one purchase of a batch and what became of it.
type BatchItem struct {
	Purchase Purchase
	Result   Result
	Err      error // ErrOutOfStock or ErrKeyReused: this item alone was refused
}

// ErrBatchConflict: an idempotency key of the batch was recorded by another transaction while the
// batch ran (possible only for another SKU); nothing was changed, and the caller should run the
// items one by one.
var ErrBatchConflict = errors.New("inventory: batch conflicts with a concurrent order")

// DeductBatch runs purchases of one SKU, in order, in one fenced transaction: one fence claim,
// one read and one write of the stock for the whole batch, one order row per accepted item.
// Items refused for stock or a reused key get their own Err; any other failure fails the whole
// batch and changes nothing.
func (s *Store) DeductBatch(ctx context.Context, sku string, token int64, items []BatchItem, beforeCommit func() error) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := claimFence(tx, sku, token); err != nil {
			return err
		}
		var stock int64
		if err := tx.Raw("SELECT stock FROM products WHERE sku = ?", sku).Row().Scan(&stock); err != nil {
			if errors.Is(err, errNoRows) {
				return ErrUnknownSKU
			}
			return fmt.Errorf("read stock: %w", err)
		}
		seen := map[string]Order{} // keys recorded earlier in this batch
		for i := range items {
			it := &items[i]
			it.Result, it.Err = Result{}, nil
			p := it.Purchase
			if p.SKU != sku {
				return fmt.Errorf("batch of %s holds a purchase of %s", sku, p.SKU)
			}
			if p.RequestID != "" {
				o, found := seen[p.RequestID]
				if !found {
					var err error
					if o, found, err = orderByRequestID(tx, p.RequestID); err != nil {
						return err
					}
				}
				if found {
					if o.SKU != p.SKU || o.Qty != p.Qty {
						it.Err = ErrKeyReused
					} else {
						it.Result = Result{Order: o, Remaining: stock, Replayed: true}
					}
					continue
				}
			}
			if stock < p.Qty {
				it.Err = ErrOutOfStock
				continue
			}
			stock -= p.Qty
			o := Order{SKU: sku, Qty: p.Qty, Replica: p.Replica, FenceToken: token}
			if p.RequestID != "" {
				key := p.RequestID
				o.RequestID = &key
			}
			if err := tx.Create(&o).Error; err != nil {
				return fmt.Errorf("record order: %w", err)
			}
			if p.RequestID != "" {
				seen[p.RequestID] = o
			}
			it.Result = Result{Order: o, Remaining: stock}
		}
		if err := tx.Exec("UPDATE products SET stock = ?, updated_at = ? WHERE sku = ?", stock, time.Now().UTC(), sku).Error; err != nil {
			return fmt.Errorf("write stock: %w", err)
		}
		if beforeCommit != nil {
			return beforeCommit()
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return ErrBatchConflict
	case errors.Is(err, ErrUnknownSKU), errors.Is(err, ErrStaleToken):
		return err
	default:
		return fmt.Errorf("inventory: batch of %d for %s: %w", len(items), sku, err)
	}
}
