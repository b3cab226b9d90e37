package inventory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	Issuer  Issuer // who issued Token
}

// CancelResult is a cancelled order.
type CancelResult struct {
	Order     Order
	Remaining int64 // stock after the units came back (for a replay: the stock now)
	Replayed  bool  // the order was cancelled before: nothing changed
}

var errCancelledMeanwhile = errors.New("order cancelled by a concurrent transaction")

// Cancel marks an order cancelled and returns its units to stock in one transaction: claim the
// fence (Fenced), read the order, move its units back as the mode says (moveStock), mark it. An
// order is cancelled once whatever the mode: the mark is a conditional update, and a second
// cancellation, concurrent or later, changes nothing and is answered as a replay. A replay is
// known before the commit, so a commit that goes unanswered after it is still a replay.
func (s *Store) Cancel(ctx context.Context, c Cancellation, mode Mode, hooks Hooks) (CancelResult, error) {
	var res CancelResult
	stmts, cancel := hooks.statements(ctx)
	defer cancel()
	err := s.inTx(ctx, stmts, func(tx *gorm.DB) error {
		if err := claimFences(tx, mode, map[string]Fence{c.SKU: {Issuer: c.Issuer, Token: c.Token}}); err != nil {
			return err
		}
		o, err := orderOf(tx, c)
		if err != nil {
			return err
		}
		if o.CancelledAt != nil {
			stock, err := readStock(tx, c.SKU, false)
			res = CancelResult{Order: o, Remaining: stock, Replayed: true}
			return err
		}
		left, err := moveStock(stmts, tx, mode, []line{{sku: c.SKU, take: -o.Qty}}, hooks.Work)
		if err != nil {
			return err
		}
		now, attempt := s.now().UTC().Truncate(time.Millisecond), newCancelAttempt()
		r := tx.Model(&Order{}).Where("id = ? AND cancelled_at IS NULL", o.ID).
			Updates(map[string]any{"cancelled_at": now, "cancel_attempt": attempt})
		switch {
		case r.Error != nil:
			return fmt.Errorf("mark cancelled: %w", r.Error)
		case r.RowsAffected == 0:
			return errCancelledMeanwhile // roll the restock back
		}
		o.CancelledAt, o.CancelAttempt = &now, attempt
		res = CancelResult{Order: o, Remaining: left[c.SKU]}
		return beforeCommit(hooks.BeforeCommit)
	})
	switch {
	case err == nil, res.Replayed && errors.Is(err, ErrOutcomeUnknown):
		return res, nil
	case errors.Is(err, errCancelledMeanwhile):
		return s.cancelReplay(stmts, c)
	}
	var cu *CommitUnanswered
	if res.Order.ID != 0 && res.Order.CancelledAt != nil && errors.As(err, &cu) {
		cu.Left, cu.CancelAttempt = map[string]int64{c.SKU: res.Remaining}, res.Order.CancelAttempt
	}
	return CancelResult{}, wrapChangeErr(fmt.Sprintf("cancel order %d", c.OrderID), err)
}

// newCancelAttempt names one attempt at a cancellation (Order.CancelAttempt).
func newCancelAttempt() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+: it crashes the program instead)
	return hex.EncodeToString(b[:])
}

func orderOf(tx *gorm.DB, c Cancellation) (Order, error) {
	var o Order
	if err := tx.Where("id = ? AND sku = ?", c.OrderID, c.SKU).Take(&o).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return Order{}, ErrUnknownOrder
		}
		return Order{}, fmt.Errorf("read order: %w", err)
	}
	return o, nil
}

func (s *Store) cancelReplay(ctx context.Context, c Cancellation) (CancelResult, error) {
	db := s.db.WithContext(ctx)
	o, err := orderOf(db, c)
	if err != nil {
		return CancelResult{}, wrapChangeErr(fmt.Sprintf("cancel order %d", c.OrderID), err)
	}
	stock, err := readStock(db, c.SKU, false)
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
