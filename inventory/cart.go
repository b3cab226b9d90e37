package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// MaxCartItems bounds a cart.
const MaxCartItems = 20

// CartItem is one line of a cart.
type CartItem struct {
	SKU string
	Qty int64
}

// Cart is a purchase of several SKUs, all or nothing. Its RequestID covers the whole cart: each
// item's order is recorded under RequestID#SKU.
type Cart struct {
	Items     []CartItem // distinct SKUs, in the client's order
	RequestID string
	NewKey    bool // RequestID was made for this cart just now
	Replica   string
	Tokens    map[string]int64 // fencing token per SKU (Fenced mode)
}

// CartResult is an accepted (or replayed) cart: one order per item, in the cart's order, and the
// stock left per SKU.
type CartResult struct {
	Orders    []Order
	Remaining map[string]int64
	Replayed  bool
}

// ShortError is ErrOutOfStock for a cart: it names the first item, in the cart's order, that has
// fewer units left than asked for.
type ShortError struct{ SKU string }

func (e *ShortError) Error() string { return "inventory: out of stock: " + e.SKU }
func (e *ShortError) Unwrap() error { return ErrOutOfStock }

// ItemKey is the key a cart item's order is recorded under.
func ItemKey(cartKey, sku string) string { return cartKey + "#" + sku }

// CartByKey finds the orders a cart's key produced (ResolveRequest first, when a commit went
// unanswered: the cart is all or nothing, so one item's order stands for all).
func (s *Store) CartByKey(ctx context.Context, c Cart) (CartResult, bool, error) {
	return cartOrders(s.db.WithContext(ctx), c)
}

// DeductCart sells a cart in one transaction, protected as mode says, touching the products in
// sorted order (the same order every cart uses, so two carts cannot deadlock on row locks):
// Fenced claims every SKU's fence with its token first; Unsafe, Unfenced and ForUpdate read,
// check and write each SKU (ForUpdate locking the rows); CAS claims each SKU in one conditional
// statement and rolls everything back when one falls short. Any short item sells nothing.
func (s *Store) DeductCart(ctx context.Context, c Cart, mode Mode, hooks Hooks) (CartResult, error) {
	if len(c.Items) == 0 || len(c.Items) > MaxCartItems {
		return CartResult{}, fmt.Errorf("inventory: a cart holds 1 to %d items, not %d", MaxCartItems, len(c.Items))
	}
	var res CartResult
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var err error
		res, err = deductCart(ctx, tx, c, mode, hooks)
		return err
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		// Another transaction recorded the cart's key first: ours rolled back, theirs is the answer.
		return s.cartReplay(ctx, c)
	}
	var short *ShortError
	if err != nil && !errors.As(err, &short) && !errors.Is(err, ErrUnknownSKU) && !errors.Is(err, ErrStaleToken) &&
		!errors.Is(err, ErrKeyReused) && !errors.Is(err, ErrOutcomeUnknown) {
		return CartResult{}, fmt.Errorf("inventory: cart of %d items: %w", len(c.Items), err)
	}
	return res, err
}

func deductCart(ctx context.Context, tx *gorm.DB, c Cart, mode Mode, hooks Hooks) (CartResult, error) {
	sorted := slices.Clone(c.Items)
	slices.SortFunc(sorted, func(a, b CartItem) int { return strings.Compare(a.SKU, b.SKU) })
	if mode == Fenced {
		for _, it := range sorted {
			if err := claimFence(tx, it.SKU, c.Tokens[it.SKU]); err != nil {
				return CartResult{}, err
			}
		}
	}
	if !c.NewKey {
		if res, found, err := cartOrders(tx, c); err != nil || found {
			return res, err
		}
	}
	stock := map[string]int64{}
	if mode == CAS {
		if hooks.Work != nil {
			if err := hooks.Work(ctx); err != nil {
				return CartResult{}, err
			}
		}
		for _, it := range sorted {
			r := tx.Exec("UPDATE products SET stock = stock - ?, updated_at = ? WHERE sku = ? AND stock >= ?", it.Qty, time.Now().UTC(), it.SKU, it.Qty)
			if r.Error != nil {
				return CartResult{}, fmt.Errorf("claim stock of %s: %w", it.SKU, r.Error)
			}
			if r.RowsAffected == 0 {
				return CartResult{}, firstShort(tx, c.Items, sorted) // rolls back what the others claimed
			}
		}
		for _, it := range sorted {
			left, err := readStock(tx, it.SKU, false)
			if err != nil {
				return CartResult{}, err
			}
			stock[it.SKU] = left
		}
	} else {
		for _, it := range sorted {
			left, err := readStock(tx, it.SKU, mode == ForUpdate)
			if err != nil {
				return CartResult{}, err
			}
			stock[it.SKU] = left
		}
		for _, it := range c.Items {
			if stock[it.SKU] < it.Qty {
				return CartResult{}, &ShortError{SKU: it.SKU}
			}
		}
		if hooks.Work != nil {
			if err := hooks.Work(ctx); err != nil {
				return CartResult{}, err
			}
		}
		for _, it := range sorted {
			stock[it.SKU] -= it.Qty
			if err := tx.Exec("UPDATE products SET stock = ?, updated_at = ? WHERE sku = ?", stock[it.SKU], time.Now().UTC(), it.SKU).Error; err != nil {
				return CartResult{}, fmt.Errorf("write stock of %s: %w", it.SKU, err)
			}
		}
	}
	orders := make([]Order, len(c.Items))
	for i, it := range c.Items {
		key := ItemKey(c.RequestID, it.SKU)
		orders[i] = Order{SKU: it.SKU, Qty: it.Qty, Replica: c.Replica, FenceToken: c.Tokens[it.SKU], RequestID: &key}
	}
	if err := tx.Create(&orders).Error; err != nil {
		return CartResult{}, fmt.Errorf("record %d orders: %w", len(orders), err)
	}
	if hooks.BeforeCommit != nil {
		if err := hooks.BeforeCommit(); err != nil {
			return CartResult{}, err
		}
	}
	return CartResult{Orders: orders, Remaining: stock}, nil
}

// firstShort names the first item, in the cart's order, that the stock cannot cover now. Its
// reads lock (a plain read would see the transaction's snapshot, which may be older than the
// claim that failed), in sorted order, as every cart locks rows.
func firstShort(tx *gorm.DB, items, sorted []CartItem) error {
	stock := map[string]int64{}
	for _, it := range sorted {
		left, err := readStock(tx, it.SKU, true)
		if err != nil {
			return err
		}
		stock[it.SKU] = left
	}
	for _, it := range items {
		if stock[it.SKU] < it.Qty {
			return &ShortError{SKU: it.SKU}
		}
	}
	return errors.New("a conditional claim failed, yet every item is in stock") // rolls back; a retry decides
}

// cartOrders finds the orders a cart's key already produced: all of them (a replay), none (a new
// cart), or some other purchase's (the key was reused).
func cartOrders(db *gorm.DB, c Cart) (CartResult, bool, error) {
	keys := []string{c.RequestID}
	for _, it := range c.Items {
		keys = append(keys, ItemKey(c.RequestID, it.SKU))
	}
	var found []Order
	if err := db.Where("request_id IN ?", keys).Find(&found).Error; err != nil {
		return CartResult{}, false, fmt.Errorf("look up the cart's key: %w", err)
	}
	if len(found) == 0 {
		return CartResult{}, false, nil
	}
	bySKU := map[string]Order{}
	for _, o := range found {
		if *o.RequestID == c.RequestID {
			return CartResult{}, false, ErrKeyReused // a single purchase's key
		}
		bySKU[o.SKU] = o
	}
	res := CartResult{Orders: make([]Order, len(c.Items)), Remaining: map[string]int64{}, Replayed: true}
	for i, it := range c.Items {
		o, ok := bySKU[it.SKU]
		if !ok || o.Qty != it.Qty || len(found) != len(c.Items) {
			return CartResult{}, false, ErrKeyReused
		}
		res.Orders[i] = o
		left, err := readStock(db, it.SKU, false)
		if err != nil {
			return CartResult{}, false, err
		}
		res.Remaining[it.SKU] = left
	}
	return res, true, nil
}

func (s *Store) cartReplay(ctx context.Context, c Cart) (CartResult, error) {
	res, found, err := cartOrders(s.db.WithContext(ctx), c)
	switch {
	case err != nil:
		return CartResult{}, err
	case !found:
		return CartResult{}, fmt.Errorf("inventory: the orders of cart %q vanished", c.RequestID)
	}
	return res, nil
}
