package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gorm.io/gorm"
)

// The idempotency keys' rules, in one place. Every keyed request records its key once, on its
// head order: a single purchase's one order, or a cart's first item in sorted order. The cart's
// other orders are recorded under ItemKey(key, sku), a name no client key can take, because client
// keys may not hold KeySeparator. The head order also records the digest of the request's body,
// so that whatever is asked under a key (a purchase, a cart, a part of a cart) finds the head
// and is a replay only when its body is the one that made it; anything else is ErrKeyReused.

// KeySeparator joins a cart's key and a SKU in an item's key; client keys must not contain it.
const KeySeparator = "#"

// ErrKeySeparator: a client's key contains KeySeparator.
var ErrKeySeparator = errors.New("inventory: an idempotency key may not contain '" + KeySeparator + "'")

// CheckClientKey refuses a key that could collide with a cart item's key.
func CheckClientKey(key string) error {
	if strings.Contains(key, KeySeparator) {
		return ErrKeySeparator
	}
	return nil
}

// ItemKey is the key a cart's order of sku is recorded under, unless it is the cart's head.
func ItemKey(cartKey, sku string) string { return cartKey + KeySeparator + sku }

// KeyOwns says whether key is the key of the request that made o (for a cart, of any of its
// orders): the capability that lets a client cancel the order.
func KeyOwns(key string, o Order) bool {
	if o.RequestID == nil || key == "" {
		return false
	}
	return *o.RequestID == key || *o.RequestID == ItemKey(key, o.SKU)
}

// bodyDigest names a request's body: its kind and its lines in sorted order.
func bodyDigest(kind string, lines []line) string {
	sorted := slices.Clone(lines)
	slices.SortFunc(sorted, func(a, b line) int { return strings.Compare(a.sku, b.sku) })
	h := sha256.New()
	h.Write([]byte(kind))
	for _, l := range sorted {
		h.Write([]byte{0})
		h.Write([]byte(l.sku))
		h.Write([]byte{0})
		h.Write([]byte(strconv.FormatInt(l.take, 10)))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Request kinds, in the digest: a cart of one item is not the purchase of that item.
const (
	kindPurchase = "purchase"
	kindCart     = "cart"
)

// keyedRequest is what a key stands for: the request's kind, its lines and its digest.
type keyedRequest struct {
	key    string
	kind   string
	lines  []line // in the client's order
	digest string
}

func newKeyedRequest(key, kind string, lines []line) keyedRequest {
	return keyedRequest{key: key, kind: kind, lines: lines, digest: bodyDigest(kind, lines)}
}

// head is the SKU whose order records the key itself.
func (r keyedRequest) head() string {
	h := r.lines[0].sku
	for _, l := range r.lines[1:] {
		h = min(h, l.sku)
	}
	return h
}

// keyOf is the key sku's order is recorded under.
func (r keyedRequest) keyOf(sku string) string {
	if r.kind == kindPurchase || sku == r.head() {
		return r.key
	}
	return ItemKey(r.key, sku)
}

// matches says whether the head order h was made by this request. Orders from before digests
// were recorded (an empty digest) were single purchases: their SKU and quantity decide.
func (r keyedRequest) matches(h Order) bool {
	if h.BodyDigest == "" {
		return r.kind == kindPurchase && h.SKU == r.lines[0].sku && h.Qty == r.lines[0].take
	}
	return h.BodyDigest == r.digest
}

// recorded finds the orders the request's key made already, in the order of its lines: found is
// false when the key is new, and ErrKeyReused says that another request made them. One query
// reads the key and, for a cart, its items' keys:
//   - the head order under the key decides, by its digest; the cart's other orders are its items;
//   - no head, but items of the key: a cart recorded before heads were (only item keys, no
//     digest), a replay when it holds exactly these lines; or the rest of a cart whose head an
//     admin reset deleted, which can be neither replayed nor sold again under its key.
func recorded(db *gorm.DB, r keyedRequest) (orders []Order, found bool, err error) {
	keys := []string{r.key}
	if r.kind == kindCart {
		for _, l := range r.lines {
			keys = append(keys, ItemKey(r.key, l.sku))
		}
	}
	var rows []Order
	if err := db.Where("request_id IN ?", keys).Find(&rows).Error; err != nil {
		return nil, false, fmt.Errorf("look up key %q: %w", r.key, err)
	}
	if len(rows) == 0 {
		return nil, false, nil
	}
	bySKU := map[string]Order{}
	var head *Order
	for i, o := range rows {
		if *o.RequestID == r.key {
			head = &rows[i]
		}
		bySKU[o.SKU] = o
	}
	switch {
	case head != nil && !r.matches(*head):
		return nil, false, ErrKeyReused
	case head == nil && (r.kind != kindCart || len(rows) != len(r.lines)):
		return nil, false, ErrKeyReused
	}
	orders = make([]Order, len(r.lines))
	for i, l := range r.lines {
		o, ok := bySKU[l.sku]
		if !ok || o.Qty != l.take || (head == nil && o.BodyDigest != "") {
			return nil, false, ErrKeyReused // a part of the key's orders is gone: an admin reset
		}
		orders[i] = o
	}
	return orders, true, nil
}
