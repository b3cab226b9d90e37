package inventory

import (
	"context"
	"fmt"
)

// MaxCartItems bounds a cart.
const MaxCartItems = 20

// CartItem is one line of a cart.
type CartItem struct {
	SKU string
	Qty int64
}

// Cart is a purchase of several SKUs, all or nothing, under one key (keys.go says how its orders
// record it).
type Cart struct {
	Items     []CartItem // distinct SKUs, in the client's order
	RequestID string
	NewKey    bool // RequestID was made for this cart just now
	Replica   string
	Tokens    map[string]int64 // fencing token per SKU (Fenced mode)
	Issuer    Issuer           // who issued the tokens
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

// Keys are the keys the cart's orders are recorded under: its own (on its head order, or on a
// cart recorded before heads were, none) and its items'.
func (c Cart) Keys() []string {
	keys := []string{c.RequestID}
	for _, it := range c.Items {
		keys = append(keys, ItemKey(c.RequestID, it.SKU))
	}
	return keys
}

func (c Cart) request() keyedRequest {
	lines := make([]line, len(c.Items))
	for i, it := range c.Items {
		lines[i] = line{sku: it.SKU, take: it.Qty}
	}
	return newKeyedRequest(c.RequestID, kindCart, lines)
}

// DeductCart sells a cart in one transaction, protected as mode says: a sale of several lines
// (see sell). Any short item sells nothing.
func (s *Store) DeductCart(ctx context.Context, c Cart, mode Mode, hooks Hooks) (CartResult, error) {
	if len(c.Items) == 0 || len(c.Items) > MaxCartItems {
		return CartResult{}, fmt.Errorf("inventory: a cart holds 1 to %d items, not %d", MaxCartItems, len(c.Items))
	}
	fences := make(map[string]Fence, len(c.Items))
	for _, it := range c.Items {
		fences[it.SKU] = Fence{Issuer: c.Issuer, Token: c.Tokens[it.SKU]}
	}
	sl := sale{req: c.request(), newKey: c.NewKey || c.RequestID == "", fences: fences, replica: c.Replica}
	orders, left, replayed, err := s.sell(ctx, sl, mode, hooks)
	if err != nil {
		return CartResult{}, wrapChangeErr(fmt.Sprintf("cart of %d items", len(c.Items)), err)
	}
	return CartResult{Orders: orders, Remaining: left, Replayed: replayed}, nil
}

// CartByKey finds the orders a cart's key made, if any: ErrKeyReused when another request (a
// single purchase, another cart, a part of this one) made them.
func (s *Store) CartByKey(ctx context.Context, c Cart) (CartResult, bool, error) {
	orders, left, found, err := replayOf(s.db.WithContext(ctx), c.request())
	if err != nil || !found {
		return CartResult{}, found, err
	}
	return CartResult{Orders: orders, Remaining: left, Replayed: true}, true, nil
}
