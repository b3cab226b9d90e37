package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Mode is how a deduction protects itself.
type Mode int

const (
	// Fenced claims the fence before anything else: the deduction goes ahead only if no newer
	// token has been written. Used under the ZooKeeper lock.
	Fenced Mode = iota
	// Unfenced trusts the lock alone.
	Unfenced
	// Unsafe is the same plain read-check-write with no lock at all: it oversells under
	// concurrency, which is what the demonstration shows. It must stay a read-modify-write.
	Unsafe
	// ForUpdate locks the product's row with SELECT ... FOR UPDATE before reading it: the
	// database serializes the deductions, no ZooKeeper involved.
	ForUpdate
	// CAS makes the check and the write one conditional statement:
	// UPDATE products SET stock = stock - qty WHERE sku = ? AND stock >= qty.
	CAS
)

func (m Mode) String() string {
	switch m {
	case Fenced:
		return "fenced"
	case Unfenced:
		return "unfenced"
	case Unsafe:
		return "unsafe"
	case ForUpdate:
		return "for-update"
	case CAS:
		return "cas"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Purchase is one deduction request.
type Purchase struct {
	SKU       string
	Qty       int64
	RequestID string // idempotency key; empty for none
	NewKey    bool   // RequestID was made for this purchase just now: no order can hold it yet
	Replica   string
	Token     int64 // fencing token (Fenced mode); recorded with the order in every mode
}

// Hooks let the caller act inside the transaction. Either may be nil.
type Hooks struct {
	// Work runs between the stock check and the write: the simulated payment call. An error
	// rolls the transaction back.
	Work func(ctx context.Context) error
	// BeforeCommit is the last word before commit; the caller checks it still holds its lock.
	BeforeCommit func() error
}

// Result is an accepted (or replayed) purchase.
type Result struct {
	Order     Order
	Remaining int64 // stock after this deduction (for a replay: the stock now)
	Replayed  bool  // the idempotency key was seen before: Order is the original, nothing changed
}

// Deduct runs one purchase in one transaction: claim the fence (Fenced only), read the stock,
// check it, run the work, write the new stock, record the order, commit. Every read goes through
// the transaction. On any error nothing is changed.
func (s *Store) Deduct(ctx context.Context, p Purchase, mode Mode, hooks Hooks) (Result, error) {
	var res Result
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var err error
		res, err = deduct(ctx, tx, p, mode, hooks)
		return err
	})
	if err == nil {
		return res, nil
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) && p.RequestID != "" {
		// Another transaction recorded the same key first (possible without a lock, or for two
		// SKUs at once): ours rolled back, theirs is the answer.
		return s.replay(ctx, p)
	}
	return Result{}, wrapDeductErr(p, err)
}

func deduct(ctx context.Context, tx *gorm.DB, p Purchase, mode Mode, hooks Hooks) (Result, error) {
	if mode == Fenced {
		items := []BatchItem{{Purchase: p}}
		if err := deductFenced(ctx, tx, p.SKU, p.Token, items, hooks.Work, hooks.BeforeCommit); err != nil {
			return Result{}, err
		}
		return items[0].Result, items[0].Err // an Err rolls the fence claim back with the rest
	}
	if p.RequestID != "" && !p.NewKey {
		o, found, err := orderByRequestID(tx, p.RequestID)
		if err != nil {
			return Result{}, err
		}
		if found {
			return replayOf(tx, o, p)
		}
	}
	var remaining int64
	var err error
	if mode == CAS {
		remaining, err = deductCAS(ctx, tx, p, hooks)
	} else {
		remaining, err = readCheckWrite(ctx, tx, p, mode, hooks)
	}
	if err != nil {
		return Result{}, err
	}
	o := Order{SKU: p.SKU, Qty: p.Qty, Replica: p.Replica, FenceToken: p.Token}
	if p.RequestID != "" {
		key := p.RequestID
		o.RequestID = &key
	}
	if err := tx.Create(&o).Error; err != nil {
		return Result{}, fmt.Errorf("record order: %w", err)
	}
	if hooks.BeforeCommit != nil {
		if err := hooks.BeforeCommit(); err != nil {
			return Result{}, err
		}
	}
	return Result{Order: o, Remaining: remaining}, nil
}

// readCheckWrite is the deduction of the Fenced, Unfenced, Unsafe and ForUpdate modes: read the
// stock, check it, do the work, write the new value.
func readCheckWrite(ctx context.Context, tx *gorm.DB, p Purchase, mode Mode, hooks Hooks) (int64, error) {
	stock, err := readStock(tx, p.SKU, mode == ForUpdate)
	if err != nil {
		return 0, err
	}
	if stock < p.Qty {
		return 0, ErrOutOfStock
	}
	if hooks.Work != nil {
		if err := hooks.Work(ctx); err != nil {
			return 0, err
		}
	}
	remaining := stock - p.Qty
	if err := tx.Exec("UPDATE products SET stock = ?, updated_at = ? WHERE sku = ?", remaining, time.Now().UTC(), p.SKU).Error; err != nil {
		return 0, fmt.Errorf("write stock: %w", err)
	}
	return remaining, nil
}

// deductCAS does the work first (a payment would be taken before the stock is claimed) and then
// claims the stock in one conditional statement, which the database applies atomically.
func deductCAS(ctx context.Context, tx *gorm.DB, p Purchase, hooks Hooks) (int64, error) {
	if hooks.Work != nil {
		if err := hooks.Work(ctx); err != nil {
			return 0, err
		}
	}
	r := tx.Exec("UPDATE products SET stock = stock - ?, updated_at = ? WHERE sku = ? AND stock >= ?", p.Qty, time.Now().UTC(), p.SKU, p.Qty)
	if r.Error != nil {
		return 0, fmt.Errorf("claim stock: %w", r.Error)
	}
	stock, err := readStock(tx, p.SKU, false)
	if err != nil {
		return 0, err
	}
	if r.RowsAffected == 0 {
		return 0, ErrOutOfStock
	}
	return stock, nil
}

// claimFence raises the product's fence to token, or fails if a newer token was written already.
// Its row lock also serializes this transaction against any other writer of the product.
func claimFence(tx *gorm.DB, sku string, token int64) error {
	r := tx.Exec("UPDATE products SET fence_token = ? WHERE sku = ? AND fence_token <= ?", token, sku, token)
	if r.Error != nil {
		return fmt.Errorf("claim fence: %w", r.Error)
	}
	if r.RowsAffected == 1 {
		return nil
	}
	var n int64
	if err := tx.Model(&Product{}).Where("sku = ?", sku).Count(&n).Error; err != nil {
		return fmt.Errorf("claim fence: %w", err)
	}
	if n == 0 {
		return ErrUnknownSKU
	}
	return ErrStaleToken
}

func (s *Store) replay(ctx context.Context, p Purchase) (Result, error) {
	o, found, err := orderByRequestID(s.db.WithContext(ctx), p.RequestID)
	if err != nil {
		return Result{}, wrapDeductErr(p, err)
	}
	if !found {
		return Result{}, wrapDeductErr(p, fmt.Errorf("order for request %q vanished", p.RequestID))
	}
	res, err := replayOf(s.db.WithContext(ctx), o, p)
	if err != nil {
		return Result{}, wrapDeductErr(p, err)
	}
	return res, nil
}

func replayOf(db *gorm.DB, o Order, p Purchase) (Result, error) {
	if o.SKU != p.SKU || o.Qty != p.Qty {
		return Result{}, ErrKeyReused
	}
	stock, err := readStock(db, o.SKU, false)
	if err != nil {
		return Result{}, err
	}
	return Result{Order: o, Remaining: stock, Replayed: true}, nil
}

func wrapDeductErr(p Purchase, err error) error {
	for _, known := range []error{ErrUnknownSKU, ErrOutOfStock, ErrStaleToken, ErrKeyReused, ErrOutcomeUnknown} {
		if errors.Is(err, known) {
			return err
		}
	}
	return fmt.Errorf("inventory: deduct %d of %s: %w", p.Qty, p.SKU, err)
}
