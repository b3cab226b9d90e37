package inventory

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// Purchase is one deduction request.
type Purchase struct {
	SKU       string
	Qty       int64
	RequestID string // idempotency key; empty for none
	NewKey    bool   // RequestID was made for this purchase just now: no order can hold it yet
	Replica   string
	Token     int64  // fencing token (Fenced mode); recorded with the order in every mode
	Issuer    Issuer // who issued Token
}

// Result is an accepted (or replayed) purchase.
type Result struct {
	Order     Order
	Remaining int64 // stock after this deduction (for a replay: the stock now)
	Replayed  bool  // the idempotency key was seen before: Order is the original, nothing changed
}

// Deduct runs one purchase in one transaction: a sale of one line (see sell).
func (s *Store) Deduct(ctx context.Context, p Purchase, mode Mode, hooks Hooks) (Result, error) {
	sl := sale{replica: p.Replica, newKey: p.NewKey || p.RequestID == "",
		req:    newKeyedRequest(p.RequestID, kindPurchase, []line{{sku: p.SKU, take: p.Qty}}),
		fences: map[string]Fence{p.SKU: {Issuer: p.Issuer, Token: p.Token}}}
	orders, left, replayed, err := s.sell(ctx, sl, mode, hooks)
	if err != nil {
		return Result{}, wrapChangeErr(fmt.Sprintf("deduct %d of %s", p.Qty, p.SKU), err)
	}
	return Result{Order: orders[0], Remaining: left[p.SKU], Replayed: replayed}, nil
}

// PurchaseByKey finds the order p's key made, if any: ErrKeyReused when another request made it.
func (s *Store) PurchaseByKey(ctx context.Context, p Purchase) (Result, bool, error) {
	// Asked before every keyed purchase's lock and nearly always new: a fixed statement answers
	// that, where GORM would build the full look-up by reflection each time.
	var taken bool
	if err := s.sqlDB.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM orders WHERE request_id = ?)", p.RequestID).Scan(&taken); err != nil {
		return Result{}, false, fmt.Errorf("inventory: look up key %q: %w", p.RequestID, err)
	}
	if !taken {
		return Result{}, false, nil
	}
	req := newKeyedRequest(p.RequestID, kindPurchase, []line{{sku: p.SKU, take: p.Qty}})
	orders, left, found, err := replayOf(s.db.WithContext(ctx), req)
	if err != nil || !found {
		return Result{}, found, err
	}
	return Result{Order: orders[0], Remaining: left[p.SKU], Replayed: true}, true, nil
}

// sale is a single purchase or a cart: lines of distinct SKUs sold all or nothing, under one key.
type sale struct {
	req     keyedRequest
	newKey  bool // no order can hold the key yet: skip the look-up
	fences  map[string]Fence
	replica string
}

// sell is the one composition of a sale: claim the fences (Fenced), look the key up, move the
// stock as the mode says, record one order per line, last word, commit. On any error nothing is
// changed. A replay is known before the commit and writes nothing, so a commit that goes
// unanswered after it is still a replay, not an unknown outcome.
//
// A sale of one line in a mode that reads plainly, the hot path, sends the same statements in the
// same order in three round trips (sellPipelined), and looks its key up in the statement that
// reads its stock: at the same place in the transaction (after the fence claim, before the check
// and the work) and in the same snapshot.
func (s *Store) sell(ctx context.Context, sl sale, mode Mode, hooks Hooks) (orders []Order, left map[string]int64, replayed bool, err error) {
	if len(sl.req.lines) == 1 && readsPlainly(mode) {
		return s.sellPipelined(ctx, sl, mode, hooks)
	}
	stmts, cancel := hooks.statements(ctx)
	defer cancel()
	err = s.inTx(ctx, stmts, func(tx *gorm.DB) error {
		if err := claimFences(tx, mode, sl.fences); err != nil {
			return err
		}
		if !sl.newKey {
			var found bool
			orders, left, found, err = replayOf(tx, sl.req)
			if err != nil || found {
				replayed = found
				return err
			}
		}
		if left, err = moveStock(stmts, tx, mode, sl.req.lines, hooks.Work); err != nil {
			return err
		}
		orders = make([]Order, len(sl.req.lines))
		for i, l := range sl.req.lines {
			orders[i] = Order{SKU: l.sku, Qty: l.take, Replica: sl.replica, FenceToken: sl.fences[l.sku].Token, BodyDigest: sl.req.digest}
			if sl.req.key != "" {
				key := sl.req.keyOf(l.sku)
				orders[i].RequestID = &key
			}
		}
		if err := s.recordOrders(tx, orders); err != nil {
			return fmt.Errorf("record %d orders: %w", len(orders), err)
		}
		return beforeCommit(hooks.BeforeCommit)
	})
	switch {
	case err == nil:
		return orders, left, replayed, nil
	case replayed:
		// Known before the commit, and nothing written: whatever became of the COMMIT (no
		// answer, or not sent once the deadline had passed), the answer is the replay.
		return orders, left, true, nil
	case errors.Is(err, gorm.ErrDuplicatedKey) && sl.req.key != "":
		// Another transaction recorded the same key first (possible without a lock, or for
		// another SKU at once): ours rolled back, theirs is the answer.
		return s.replay(stmts, sl.req)
	}
	return nil, nil, false, withAttempt(err, orders, left)
}

// replayOf is the answer to a request whose key made orders already: those orders, and the stock
// now.
func replayOf(db *gorm.DB, req keyedRequest) ([]Order, map[string]int64, bool, error) {
	orders, found, err := recorded(db, req)
	if err != nil || !found {
		return nil, nil, found, err
	}
	left := map[string]int64{}
	for _, l := range req.lines {
		if left[l.sku], err = readStock(db, l.sku, false); err != nil {
			return nil, nil, false, err
		}
	}
	return orders, left, true, nil
}

// wrapChangeErr names the change in an error, except the errors callers match on.
func wrapChangeErr(what string, err error) error {
	var short *ShortError
	if errors.As(err, &short) {
		return err
	}
	for _, known := range []error{ErrUnknownSKU, ErrOutOfStock, ErrStaleToken, ErrKeyReused, ErrOutcomeUnknown, ErrRolledBack, ErrUnknownOrder} {
		if errors.Is(err, known) {
			return err
		}
	}
	return fmt.Errorf("inventory: %s: %w", what, err)
}
