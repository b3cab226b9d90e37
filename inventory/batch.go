package inventory

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// BatchItem is one purchase of a batch and what became of it.
type BatchItem struct {
	Purchase Purchase
	Result   Result
	Err      error // ErrOutOfStock or ErrKeyReused: this item alone was refused
	// Repeat: the item's key repeats an earlier purchase of this batch, which it replays.
	Repeat bool
	// known: the answer does not hang on this batch's commit, so it stands when the commit goes
	// unanswered: a replay of an order committed before, a key some earlier request made, a
	// quantity the stock did not cover before this batch sold anything.
	known bool
}

// ErrBatchConflict: an idempotency key of the batch was recorded by another transaction while the
// batch ran (possible only for another SKU); nothing was changed, and the caller should run the
// items one by one.
var ErrBatchConflict = errors.New("inventory: batch conflicts with a concurrent order")

// DeductBatch runs purchases of one SKU, in order, in one fenced transaction: one fence claim,
// one read of the stock, one look-up of the batch's keys, one insert of the accepted orders
// (recordOrders: one statement on MariaDB) and one write of the stock, whatever the batch's size.
// Items refused for stock or a reused key get their own Err; any other failure fails the whole
// batch and changes nothing. A commit that goes unanswered is ErrOutcomeUnknown for the batch,
// except for the items already known to be replays, which wrote nothing and keep their answers.
func (s *Store) DeductBatch(ctx context.Context, sku string, fence Fence, items []BatchItem, lastWord func() error) error {
	err := s.inTx(ctx, ctx, func(tx *gorm.DB) error {
		return s.deductBatch(tx, sku, fence, items, lastWord)
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return ErrBatchConflict
	case errors.Is(err, ErrOutcomeUnknown):
		for i := range items {
			if !items[i].known {
				// Repeat stays: settling needs it. Each item keeps what the batch wrote for it:
				// its order, and the stock right after it in the batch's order.
				items[i].Result, items[i].Err = Result{}, itemAttempt(err, items[i].Result)
			}
		}
		return err
	case errors.Is(err, ErrUnknownSKU), errors.Is(err, ErrStaleToken):
		return err
	default:
		return fmt.Errorf("inventory: batch of %d for %s: %w", len(items), sku, err)
	}
}

// itemAttempt is the batch's unanswered commit as one item's attempt: its order and the stock
// right after it, which a look-up of its key after the batch cannot tell.
func itemAttempt(err error, r Result) error {
	var cu *CommitUnanswered
	if !errors.As(err, &cu) {
		return err
	}
	if r.Order.ID == 0 { // it made no order: its own copy still, so that no item shares another's
		return &CommitUnanswered{Conn: cu.Conn, Orders: []int64{}, err: err}
	}
	return &CommitUnanswered{Conn: cu.Conn, Orders: []int64{r.Order.ID}, Left: map[string]int64{r.Order.SKU: r.Remaining}, err: err}
}

// deductBatch decides every item from one read of the stock, in the batch's order: a replay for a
// key that made an order already (or earlier in the batch), ErrKeyReused for a key that made
// another, ErrOutOfStock when the stock left cannot cover it, a sale otherwise.
func (s *Store) deductBatch(tx *gorm.DB, sku string, fence Fence, items []BatchItem, lastWord func() error) error {
	if err := claimFence(tx, sku, fence); err != nil {
		return err
	}
	stock, err := readStock(tx, sku, false)
	if err != nil {
		return err
	}
	before := stock
	heads, err := headsOf(tx, items)
	if err != nil {
		return err
	}
	var orders []Order
	answers := make(map[int]int) // item -> the index in orders of the order it answers with
	newKeys := map[string]int{}  // key -> index in orders, for repeats within the batch
	for i := range items {
		it := &items[i]
		it.Result, it.Err, it.Repeat, it.known = Result{}, nil, false, false
		p := it.Purchase
		if p.SKU != sku {
			return fmt.Errorf("batch of %s holds a purchase of %s", sku, p.SKU)
		}
		req := newKeyedRequest(p.RequestID, kindPurchase, []line{{sku: p.SKU, take: p.Qty}})
		if p.RequestID != "" {
			if h, found := heads[p.RequestID]; found {
				if !req.matches(h) {
					it.Err = ErrKeyReused
				} else {
					it.Result = Result{Order: h, Remaining: stock, Replayed: true}
				}
				it.known = true
				continue
			}
			if j, found := newKeys[p.RequestID]; found {
				// Both answers hang on the commit: the key is used only if the batch commits.
				it.Repeat = true
				if orders[j].BodyDigest != req.digest {
					it.Err = ErrKeyReused
				} else {
					answers[i] = j
					it.Result = Result{Remaining: stock, Replayed: true}
				}
				continue
			}
		}
		if stock < p.Qty {
			// Known only if the stock fell short before this batch sold anything: otherwise it
			// was short because of sales that stand only if the batch commits.
			it.Err, it.known = ErrOutOfStock, before < p.Qty
			continue
		}
		stock -= p.Qty
		o := Order{SKU: sku, Qty: p.Qty, Replica: p.Replica, FenceToken: fence.Token, BodyDigest: req.digest}
		if p.RequestID != "" {
			key := p.RequestID
			o.RequestID = &key
			newKeys[key] = len(orders)
		}
		answers[i] = len(orders)
		orders = append(orders, o)
		it.Result = Result{Remaining: stock}
	}
	if len(orders) > 0 {
		if err := s.recordOrders(tx, orders); err != nil {
			return fmt.Errorf("record %d orders: %w", len(orders), err)
		}
		for i, j := range answers {
			items[i].Result.Order = orders[j]
		}
		if err := writeStock(tx, sku, stock, before-stock); err != nil {
			return err
		}
	}
	return beforeCommit(lastWord)
}

// headsOf reads, in one query, the orders already recorded under the batch's keys.
func headsOf(tx *gorm.DB, items []BatchItem) (map[string]Order, error) {
	var keys []string
	for _, it := range items {
		if it.Purchase.RequestID != "" && !it.Purchase.NewKey {
			keys = append(keys, it.Purchase.RequestID)
		}
	}
	heads := map[string]Order{}
	if len(keys) == 0 {
		return heads, nil
	}
	var found []Order
	if err := tx.Where("request_id IN ?", keys).Find(&found).Error; err != nil {
		return nil, fmt.Errorf("look up %d idempotency keys: %w", len(keys), err)
	}
	for _, o := range found {
		heads[*o.RequestID] = o
	}
	return heads, nil
}
