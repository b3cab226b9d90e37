package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Cancellation returns one order's units to stock.
type Cancellation struct {
	OrderID int64
	SKU     string // the order's SKU, whose lock the caller holds
	Token   int64  // fencing token (Fenced mode)
}

// CancelResult is a cancelled order.
type CancelResult struct {
	Order     Order
	Remaining int64 // stock after the units came back (for a replay: the stock now)
	Replayed  bool  // the order was cancelled before: nothing changed
}

var errCancelledMeanwhile = errors.New("order cancelled by a concurrent transaction")

// Cancel marks an order cancelled and returns its units to stock, in one transaction, protected as
// mode says: Fenced claims the fence first; Unsafe, Unfenced and ForUpdate read the stock, run the
// work and write stock+qty (Unsafe and Unfenced trusting a lock, or nothing); CAS adds in one
// statement. Whatever the mode, an order is cancelled once: the mark is a conditional update, and
// a second cancellation, concurrent or later, changes nothing and is answered as a replay.
func (s *Store) Cancel(ctx context.Context, c Cancellation, mode Mode, hooks Hooks) (CancelResult, error) {
	var res CancelResult
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var err error
		res, err = cancel(ctx, tx, c, mode, hooks)
		return err
	})
	if errors.Is(err, errCancelledMeanwhile) {
		return s.cancelReplay(ctx, c)
	}
	if err != nil && !errors.Is(err, ErrUnknownOrder) && !errors.Is(err, ErrStaleToken) && !errors.Is(err, ErrOutcomeUnknown) {
		return CancelResult{}, fmt.Errorf("inventory: cancel order %d: %w", c.OrderID, err)
	}
	return res, err
}

func cancel(ctx context.Context, tx *gorm.DB, c Cancellation, mode Mode, hooks Hooks) (CancelResult, error) {
	if mode == Fenced {
		if err := claimFence(tx, c.SKU, c.Token); err != nil {
			return CancelResult{}, err
		}
	}
	var o Order
	if err := tx.Where("id = ? AND sku = ?", c.OrderID, c.SKU).Take(&o).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return CancelResult{}, ErrUnknownOrder
		}
		return CancelResult{}, fmt.Errorf("read order: %w", err)
	}
	if o.CancelledAt != nil {
		stock, err := readStock(tx, c.SKU, false)
		return CancelResult{Order: o, Remaining: stock, Replayed: true}, err
	}
	var remaining int64
	if mode == CAS {
		if hooks.Work != nil {
			if err := hooks.Work(ctx); err != nil {
				return CancelResult{}, err
			}
		}
		if err := tx.Exec("UPDATE products SET stock = stock + ?, updated_at = ? WHERE sku = ?", o.Qty, time.Now().UTC(), c.SKU).Error; err != nil {
			return CancelResult{}, fmt.Errorf("restock: %w", err)
		}
		stock, err := readStock(tx, c.SKU, false)
		if err != nil {
			return CancelResult{}, err
		}
		remaining = stock
	} else {
		stock, err := readStock(tx, c.SKU, mode == ForUpdate)
		if err != nil {
			return CancelResult{}, err
		}
		if hooks.Work != nil {
			if err := hooks.Work(ctx); err != nil {
				return CancelResult{}, err
			}
		}
		remaining = stock + o.Qty
		if err := tx.Exec("UPDATE products SET stock = ?, updated_at = ? WHERE sku = ?", remaining, time.Now().UTC(), c.SKU).Error; err != nil {
			return CancelResult{}, fmt.Errorf("restock: %w", err)
		}
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	r := tx.Model(&Order{}).Where("id = ? AND cancelled_at IS NULL", o.ID).Update("cancelled_at", now)
	if r.Error != nil {
		return CancelResult{}, fmt.Errorf("mark cancelled: %w", r.Error)
	}
	if r.RowsAffected == 0 {
		return CancelResult{}, errCancelledMeanwhile // roll the restock back
	}
	o.CancelledAt = &now
	if hooks.BeforeCommit != nil {
		if err := hooks.BeforeCommit(); err != nil {
			return CancelResult{}, err
		}
	}
	return CancelResult{Order: o, Remaining: remaining}, nil
}

func (s *Store) cancelReplay(ctx context.Context, c Cancellation) (CancelResult, error) {
	o, found, err := s.OrderByID(ctx, c.OrderID)
	switch {
	case err != nil:
		return CancelResult{}, err
	case !found || o.SKU != c.SKU:
		return CancelResult{}, ErrUnknownOrder
	}
	stock, err := readStock(s.db.WithContext(ctx), c.SKU, false)
	if err != nil {
		return CancelResult{}, fmt.Errorf("inventory: cancel order %d: %w", c.OrderID, err)
	}
	return CancelResult{Order: o, Remaining: stock, Replayed: true}, nil
}

// ResolveCancel learns whether an order is cancelled after a cancellation's COMMIT went
// unanswered: a locking read of the order's row waits for a transaction still holding it.
func (s *Store) ResolveCancel(ctx context.Context, id int64) (Order, error) {
	var o Order
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", id).Take(&o).Error
	})
	if err != nil {
		return Order{}, fmt.Errorf("inventory: resolve cancellation of order %d: %w", id, err)
	}
	return o, nil
}

func readStock(tx *gorm.DB, sku string, forUpdate bool) (int64, error) {
	q := "SELECT stock FROM products WHERE sku = ?"
	if forUpdate {
		q += " FOR UPDATE"
	}
	var stock int64
	if err := tx.Raw(q, sku).Row().Scan(&stock); err != nil {
		if errors.Is(err, errNoRows) {
			return 0, ErrUnknownSKU
		}
		return 0, fmt.Errorf("read stock: %w", err)
	}
	return stock, nil
}
