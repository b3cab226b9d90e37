package sale

import (
	"context"
	"math"
	"time"
)

// The sold-out answer before a key is held (soldout.go). A purchase of a suspected SKU waits for
// the poller's next read rather than holding its key and reading the stock itself: in a flash
// sale the buyers past the stock then cost the database one round trip a read between them, not
// a holding's write, its release and a read each. Found short by a read begun after it arrived,
// and its key in no use at a look-up made after the read (no order, no other attempt's unexpired
// holding: inventory.Store.KeysInUse), it is answered out_of_stock having written nothing.
// Otherwise (stock enough, a key in use, a read or look-up that failed or took too long) it goes
// on to hold its key like any purchase.
//
// The answer promises what one given after holding the key would: at the look-up no attempt
// under the key had sold or held it (a holding committed), and an attempt that holds the key
// later could as well have held it once this one's holding was released. The wait counts
// against keyHoldWithin, from the purchase's arrival (HoldPurchase).

// unheldPurchase is a purchase waiting for a read before holding its key.
type unheldPurchase struct {
	qty    int64
	key    string    // the client's Idempotency-Key; empty for a key the service made
	seenBy uint64    // the reads begun before it arrived
	short  chan bool // its answer, once: out_of_stock (true), or hold the key and go on
}

// unheldWait bounds a purchase's wait for the read, well within keyHoldWithin, which counts from
// its arrival: past it (a slow database) the purchase holds its key as any other, in time.
const unheldWait = 250 * time.Millisecond

// shortBeforeHold says whether a purchase of qty units of sku, under key (empty for a key the
// service made), is out_of_stock as of a read made after now with its key in no use: it may be
// answered so without holding its key. False, at once, for a SKU not suspected here.
func (so *soldOut) shortBeforeHold(ctx context.Context, sku string, qty int64, key string) bool {
	so.mu.Lock()
	w := so.skus[sku]
	if w == nil || !w.suspect {
		so.mu.Unlock()
		return false
	}
	if so.trustSuspicion {
		so.mu.Unlock()
		return true // the negative control's mistake (tests only)
	}
	u := &unheldPurchase{qty: qty, key: key, seenBy: so.reads, short: make(chan bool, 1)}
	if w.unheld == nil {
		w.unheld = map[*unheldPurchase]struct{}{}
	}
	w.unheld[u] = struct{}{}
	so.startPolling()
	so.mu.Unlock()

	t := time.NewTimer(unheldWait)
	defer t.Stop()
	select {
	case short := <-u.short:
		return short
	case <-ctx.Done():
	case <-t.C:
	}
	so.mu.Lock()
	if w := so.skus[sku]; w != nil {
		delete(w.unheld, u)
		so.forget(sku, w)
	}
	so.mu.Unlock()
	select {
	case short := <-u.short: // answered as it gave up
		return short
	default:
		return false
	}
}

// unheldOf takes out of w the purchases waiting before their holds that arrived before the read
// numbered read began: those it leaves short of stock are returned, the others told to go on.
// Under so.mu.
func unheldOf(w *stockWatch, stock int64, read uint64) (short []*unheldPurchase) {
	for u := range w.unheld {
		if u.seenBy >= read {
			continue
		}
		delete(w.unheld, u)
		if u.qty > stock {
			short = append(short, u)
		} else {
			u.short <- false
		}
	}
	return short
}

// sendOnUnheld sends every purchase waiting before its hold in w on to hold its key. Under so.mu.
func sendOnUnheld(w *stockWatch) { sendOnUnheldBefore(w, math.MaxUint64) }

// sendOnUnheldBefore sends on those that arrived before the read numbered read began. Under so.mu.
func sendOnUnheldBefore(w *stockWatch, read uint64) {
	for u := range w.unheld {
		if u.seenBy < read {
			delete(w.unheld, u)
			u.short <- false
		}
	}
}

// appendUnheldKeys appends the client keys of the purchases waiting before their holds in w.
// Under so.mu.
func appendUnheldKeys(keys []string, w *stockWatch) []string {
	for u := range w.unheld {
		if u.key != "" {
			keys = append(keys, u.key)
		}
	}
	return keys
}

// sendOnAfterFailedRead sends the purchases of skus waiting for the read numbered read, which
// failed, on to hold their keys at once: the database is slow or away, and their holds must be
// answered within keyHoldWithin of their arrival.
func (so *soldOut) sendOnAfterFailedRead(skus []string, read uint64) {
	so.mu.Lock()
	defer so.mu.Unlock()
	for _, sku := range skus {
		if w := so.skus[sku]; w != nil {
			sendOnUnheldBefore(w, read)
		}
	}
}

// answerUnheld answers the purchases a read found short, after a look-up of their keys made after
// the read (inUse, when the read made it; else one here): those whose key is in no use (or who
// have none a client used) are out_of_stock; the others, and all when the look-up fails, hold
// their keys and go on.
func (so *soldOut) answerUnheld(short []*unheldPurchase, inUse map[string]bool) {
	var keys []string
	for _, u := range short {
		if u.key != "" {
			keys = append(keys, u.key)
		}
	}
	lookedUp := inUse != nil
	if !lookedUp {
		inUse, lookedUp = lookUpKeys(so.keysInUse, keys)
	}
	for _, u := range short {
		u.short <- u.key == "" || (lookedUp && !inUse[u.key])
	}
}
