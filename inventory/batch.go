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
// one read of the stock, one look-up of the batch's idempotency keys, one multi-row insert of the
// accepted orders and one write of the stock, whatever the batch's size. Items refused for stock
// or a reused key get their own Err; any other failure fails the whole batch and changes nothing.
func (s *Store) DeductBatch(ctx context.Context, sku string, token int64, items []BatchItem, beforeCommit func() error) error {
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		return deductFenced(ctx, tx, sku, token, items, nil, beforeCommit)
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return ErrBatchConflict
	case errors.Is(err, ErrUnknownSKU), errors.Is(err, ErrStaleToken), errors.Is(err, ErrOutcomeUnknown):
		return err
	default:
		return fmt.Errorf("inventory: batch of %d for %s: %w", len(items), sku, err)
	}
}

// deductFenced is the one fenced deduction, of a batch or of a single purchase (a batch of one):
// the fence claim first, before any read (under REPEATABLE READ the first plain read fixes the
// transaction's snapshot, and one taken before the claim may predate a writer the claim waited
// for), then the stock, the keys, the checks, the work (work, if any, once, when something is to
// be sold), the orders and the stock written back.
func deductFenced(ctx context.Context, tx *gorm.DB, sku string, token int64, items []BatchItem, work func(context.Context) error, beforeCommit func() error) error {
	if err := claimFence(tx, sku, token); err != nil {
		return err
	}
	stock, err := readStock(tx, sku, false)
	if err != nil {
		return err
	}
	recorded, err := ordersByRequestIDs(tx, items)
	if err != nil {
		return err
	}
	var orders []Order
	answers := make(map[int]int) // item -> the index in orders of the order it answers with
	newKeys := map[string]int{}  // key -> index in orders, for repeats within the batch
	for i := range items {
		it := &items[i]
		it.Result, it.Err = Result{}, nil
		p := it.Purchase
		if p.SKU != sku {
			return fmt.Errorf("batch of %s holds a purchase of %s", sku, p.SKU)
		}
		if p.RequestID != "" {
			if o, found := recorded[p.RequestID]; found {
				if o.SKU != p.SKU || o.Qty != p.Qty {
					it.Err = ErrKeyReused
				} else {
					it.Result = Result{Order: o, Remaining: stock, Replayed: true}
				}
				continue
			}
			if j, found := newKeys[p.RequestID]; found {
				if orders[j].Qty != p.Qty {
					it.Err = ErrKeyReused
				} else {
					answers[i] = j
					it.Result = Result{Remaining: stock, Replayed: true}
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
			newKeys[key] = len(orders)
		}
		answers[i] = len(orders)
		orders = append(orders, o)
		it.Result = Result{Remaining: stock}
	}
	if len(orders) > 0 && work != nil {
		if err := work(ctx); err != nil {
			return err
		}
	}
	if len(orders) > 0 {
		// One INSERT of many rows: MySQL and MariaDB give a simple multi-row insert consecutive
		// ids in every auto-increment lock mode, which is what GORM assigns back.
		if err := tx.Create(&orders).Error; err != nil {
			return fmt.Errorf("record %d orders: %w", len(orders), err)
		}
		for i, j := range answers {
			items[i].Result.Order = orders[j]
		}
		if err := tx.Exec("UPDATE products SET stock = ?, updated_at = ? WHERE sku = ?", stock, time.Now().UTC(), sku).Error; err != nil {
			return fmt.Errorf("write stock: %w", err)
		}
	}
	if beforeCommit != nil {
		return beforeCommit()
	}
	return nil
}

// ordersByRequestIDs reads, in one query, the orders already recorded under the batch's keys.
func ordersByRequestIDs(tx *gorm.DB, items []BatchItem) (map[string]Order, error) {
	var keys []string
	for _, it := range items {
		if it.Purchase.RequestID != "" && !it.Purchase.NewKey {
			keys = append(keys, it.Purchase.RequestID)
		}
	}
	recorded := map[string]Order{}
	if len(keys) == 0 {
		return recorded, nil
	}
	var found []Order
	if err := tx.Where("request_id IN ?", keys).Find(&found).Error; err != nil {
		return nil, fmt.Errorf("look up %d idempotency keys: %w", len(keys), err)
	}
	for _, o := range found {
		recorded[*o.RequestID] = o
	}
	return recorded, nil
}
