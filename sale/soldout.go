package sale

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// A product that has sold out is answered without its lock queue. Waiting a turn in the queue to
// learn that nothing is left costs the buyer the whole queue's time (seconds in a flash sale, or
// LOCK_TIMEOUT and a 503 instead of a 409), and costs every buyer behind it a hand-off.
//
// A 409 must stay true: at some moment between the purchase's arrival and its answer there was
// not enough stock. A cached "sold out" flag alone is not that (a cancellation on another replica
// may have restocked it since), so the flag here is only a suspicion, and every 409 it leads to
// rests on a read of the committed stock made after the purchase arrived:
//
//   - A purchase of a suspected SKU first waits for the poller's next read, holding nothing
//     (soldout_unheld.go); if that does not answer it, it holds its key, reads the stock before
//     it queues, and answers 409 at once if it is short; otherwise it queues as always.
//   - While a suspected SKU has purchases queued for its lock here, or waiting before their
//     holds, a poller reads its stock (every such SKU in one statement) every soldOutPoll, and
//     answers, with a 409, the purchases that ask for more than it holds and that queued (or
//     began to wait) before the read began.
//     They leave the queue as any waiter that gives up does: their node is deleted.
//
// A SKU becomes suspected on this replica when a sale here leaves it short of what a purchase
// queued here asks for, or a purchase here is answered out_of_stock under the lock. The other
// replicas learn it the same way within a turn or two of their own: the queue is first come,
// first served across the fleet, so each of them soon has a holder that finds the stock short.
// A restock is seen by the next read (cancellations and resets here also drop the suspicion at
// once); nothing is cached that could refuse a sellable purchase.
type soldOut struct {
	stocks func(ctx context.Context, skus []string) (map[string]int64, error)
	// keys, when set, says which of the keys of the purchases a read sends away hold an order,
	// in one look-up made after the read (inventory.Store.KeysWithOrders).
	keys func(ctx context.Context, keys []string) (map[string]bool, error)
	// keysInUse says which of the keys of the purchases a read answers before their holds hold an
	// order or another attempt's holding (inventory.Store.KeysInUse; soldout_unheld.go);
	// stocksThenKeys, when set, reads the stocks and then looks such keys up, in one round trip.
	keysInUse      func(ctx context.Context, keys []string) (map[string]bool, error)
	stocksThenKeys func(ctx context.Context, skus, keys []string) (map[string]int64, map[string]bool, error)
	stop           <-chan struct{}

	mu   sync.Mutex
	skus map[string]*stockWatch
	// reads counts the poller's reads begun: a queued purchase is sent away only by a read that
	// began after it queued (queuedPurchase.seenBy < the read's number).
	reads   uint64
	polling bool
	wake    chan struct{}
	// seen, when set, is told every stock read here, and every restock made here (a stock of
	// -1: the amount is not known); never under mu. Admission foresees waits by it.
	seen func(sku string, stock int64)
	// trustSuspicion (a planted lie, or a test) answers a suspected SKU out_of_stock without
	// reading the stock: the mistake the linearizability check must catch.
	trustSuspicion bool
}

// soldOutPoll is how often a suspected SKU's stock is read while purchases are queued for it here.
// A turn of the hottest lock is a few milliseconds: a queued purchase learns that the product is
// gone within about this, and one read a SKU costs far less than the turns it saves.
const soldOutPoll = 10 * time.Millisecond

// soldOutReadTimeout bounds one poll, so that a database that stops answering holds up nothing
// else: the purchases stay queued, and their locked deductions decide.
const soldOutReadTimeout = time.Second

// stockWatch is one SKU's state here: the suspicion, and the purchases queued for its lock.
type stockWatch struct {
	suspect bool
	queued  map[*queuedPurchase]struct{}
	unheld  map[*unheldPurchase]struct{} // waiting for a read before their holds
}

// queuedPurchase is a purchase waiting for its SKU's lock.
type queuedPurchase struct {
	qty    int64
	key    string // the client's Idempotency-Key; empty for a key the service made
	seenBy uint64 // the reads begun before it queued
	leave  context.CancelCauseFunc
}

// errSoldOutWhileQueued ends the lock wait of a queued purchase that a read of the stock showed
// cannot be served; the purchase is answered out_of_stock once its key is known not to hold an
// order.
var errSoldOutWhileQueued = errors.New("sold out while queued")

// errSoldOutKeyFree ends it when, besides, a look-up made after the read found no order under
// the purchase's key (or it has none a client could have used): out_of_stock is then true as of
// the read, with no look-up of its own.
var errSoldOutKeyFree = fmt.Errorf("%w, its key holding no order", errSoldOutWhileQueued)

// newSoldOut reads stocks with stocks and polls until stop closes; with trustSuspicion (the
// planted lie SoldOutCache) it answers a suspected SKU sold out without reading its stock.
func newSoldOut(stocks func(context.Context, []string) (map[string]int64, error), stop <-chan struct{}, trustSuspicion bool) *soldOut {
	return &soldOut{stocks: stocks, stop: stop, skus: map[string]*stockWatch{}, wake: make(chan struct{}, 1), trustSuspicion: trustSuspicion}
}

// watch is sku's state, made if missing. Under so.mu.
func (so *soldOut) watch(sku string) *stockWatch {
	w := so.skus[sku]
	if w == nil {
		w = &stockWatch{queued: map[*queuedPurchase]struct{}{}}
		so.skus[sku] = w
	}
	return w
}

// forget drops a SKU's state once it holds nothing worth keeping. Under so.mu.
func (so *soldOut) forget(sku string, w *stockWatch) {
	if !w.suspect && len(w.queued) == 0 && len(w.unheld) == 0 {
		delete(so.skus, sku)
	}
}

// suspected says whether sku may be short: a purchase of it then reads the stock before queueing.
func (so *soldOut) suspected(sku string) bool {
	so.mu.Lock()
	defer so.mu.Unlock()
	w := so.skus[sku]
	return w != nil && w.suspect
}

// shortBeforeQueue reads the committed stock of a suspected SKU and says whether it holds fewer
// than qty units: then the purchase is answered out_of_stock without queueing, and the answer is
// true as of the read, made after the purchase arrived. A read that fails says nothing; the
// purchase queues, and its locked deduction decides.
func (so *soldOut) shortBeforeQueue(ctx context.Context, sku string, qty int64) bool {
	so.mu.Lock()
	w, trust := so.skus[sku], so.trustSuspicion
	suspect := w != nil && w.suspect
	so.mu.Unlock()
	if !suspect {
		return false
	}
	if trust {
		return true // the negative control's mistake (tests only)
	}
	stocks, err := so.stocks(ctx, []string{sku})
	if err != nil {
		return false
	}
	stock, ok := stocks[sku]
	if ok && stock > 0 {
		so.unsuspect(sku) // restocked elsewhere, or never short: later purchases need not read
	}
	if ok {
		so.tell(sku, stock)
	}
	return ok && stock < qty
}

// noteStock takes the stock a sale here left: short of what a purchase queued here asks for (or
// empty), the SKU becomes suspected and the poller looks at it at once.
func (so *soldOut) noteStock(sku string, stock int64) {
	so.mu.Lock()
	defer so.mu.Unlock()
	short := stock == 0
	if w := so.skus[sku]; w != nil && !short {
		for q := range w.queued {
			if q.qty > stock {
				short = true
				break
			}
		}
	}
	if short {
		so.watch(sku).suspect = true
		so.startPolling()
	}
}

// noteShort takes an out_of_stock answered under the lock.
func (so *soldOut) noteShort(sku string) {
	so.mu.Lock()
	defer so.mu.Unlock()
	so.watch(sku).suspect = true
	so.startPolling()
}

// noteRestock takes a restock made here (a cancellation, an admin reset) that left stock units,
// or an amount not known (a negative stock).
func (so *soldOut) noteRestock(sku string, stock int64) {
	so.unsuspect(sku)
	so.tell(sku, max(stock, -1))
}

// unsuspect drops the suspicion of sku.
func (so *soldOut) unsuspect(sku string) {
	so.mu.Lock()
	defer so.mu.Unlock()
	if w := so.skus[sku]; w != nil {
		w.suspect = false
		sendOnUnheld(w) // no read will be made for them
		so.forget(sku, w)
	}
}

// tell passes a stock read here or made by a restock here, or a restock of an amount not known
// (-1), to seen.
func (so *soldOut) tell(sku string, stock int64) {
	if so.seen != nil {
		so.seen(sku, stock)
	}
}

// queue registers a purchase of qty units of sku, under the client's key (empty for a key the
// service made), for the time it waits for the lock: the context it returns is cancelled with a
// cause wrapping errSoldOutWhileQueued if a read begun after now shows the stock short of qty
// (errSoldOutKeyFree when a look-up after the read found no order under the key). done ends the
// registration; call it as soon as the lock is held or given up.
func (so *soldOut) queue(ctx context.Context, sku string, qty int64, key string) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	so.mu.Lock()
	q := &queuedPurchase{qty: qty, key: key, seenBy: so.reads, leave: cancel}
	w := so.watch(sku)
	w.queued[q] = struct{}{}
	if w.suspect {
		so.startPolling()
	}
	so.mu.Unlock()
	return ctx, func() {
		so.mu.Lock()
		if w := so.skus[sku]; w != nil {
			delete(w.queued, q)
			so.forget(sku, w)
		}
		so.mu.Unlock()
		cancel(nil)
	}
}

// leftQueue marks a lock wait that a read of the stock ended: sell turns it into out_of_stock
// once the purchase's key is known not to have sold (keyAfterShortRead), and counts it there. A
// wait that took the lock as it was sent away keeps the lock: its turn decides.
func leftQueue(waitCtx context.Context, err error) error {
	if cause := context.Cause(waitCtx); err != nil && errors.Is(cause, errSoldOutWhileQueued) {
		return fmt.Errorf("%w: %w", cause, inventory.ErrOutOfStock)
	}
	return err
}
