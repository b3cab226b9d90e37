package sale

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// lockGate keeps a SKU's lock queue on this replica no longer than its stock. A purchase that
// finds the units queued for the lock here already covering the stock seen lately waits beside
// the queue, first come first served, until the queue has room for it (a holder's sale left more
// than its units were counted for, or a read or a restock showed more stock), or until its wait
// ends: a read of the stock sends it away (it is registered with the sold-out poller before it
// comes here, soldout.go), or the lock deadline passes.
//
// A queue longer than the stock serves nobody more: every purchase past the stock is answered by
// the sell-out, while each of their nodes in ZooKeeper costs the fleet's queue its writes and
// every hand-off a longer list of waiters.
//
// It is an estimate, never a safety decision: a purchase let through is sold or refused by its
// locked deduction, and one that waits beside the queue is answered out_of_stock only on a read
// of the stock, or gives up at the lock deadline having taken no lock and sold nothing. While the
// stock has not been seen here (nothing sold here yet, a restock of an amount not known), one
// purchase at a time queues and the stock is read: a burst at a sale's start must not put every
// buyer's node in ZooKeeper before the first turn has said what is left. A stock seen longer
// than fresh ago (another replica may have restocked since) gates nobody, and is read again: a
// stall (a database failing over) must not leave the queue one purchase at a time after it.
type lockGate struct {
	fresh time.Duration
	now   func() time.Time
	// read reads a SKU's stock for the gate that does not know it; nil reads none (the next
	// sale here says what is left). At most gateReads run at once, across the SKUs.
	read    func(ctx context.Context, sku string) (int64, error)
	reading chan struct{}

	mu   sync.Mutex
	skus map[string]*gatedSKU
}

// gatedSKU is one SKU's gate: the stock seen, and the purchases queued for its lock here or
// waiting beside it.
type gatedSKU struct {
	stock   int64         // the stock seen, less the units of the turns that sold since; negative: not known
	seenAt  time.Time     // when the stock was seen
	queued  int64         // units let through to the lock whose turn is not over (the holder's too)
	waiting []*gateWaiter // first come, first served; entries gone are skipped
	live    int           // waiting entries not gone
	reading bool          // a read of the stock is under way
	// readAfter: a read failed, and the next is not begun before it.
	readAfter time.Time
	noted     uint64 // noteStock's calls: a read begun before the last is not taken
}

// gateReadTimeout bounds a read of the stock for the gate, and is the pause after one fails;
// gateReads bounds the reads under way at once, so that a sale beginning on many SKUs does not
// take the connections the turns need.
const (
	gateReadTimeout = time.Second
	gateReads       = 4
)

// gateWaiter is a purchase waiting beside the queue: room is closed when it is let through.
type gateWaiter struct {
	qty  int64
	room chan struct{}
	gone bool
}

func newLockGate(fresh time.Duration) *lockGate {
	return &lockGate{fresh: fresh, now: time.Now, skus: map[string]*gatedSKU{}, reading: make(chan struct{}, gateReads)}
}

// enter lets a purchase of qty units of sku through to its lock queue, at once when the queue
// here has room for it, or after a wait beside the queue. The wait ends with ctx: the error then
// wraps context.Cause(ctx), and nothing was queued. passed, called once the purchase's turn is
// over, or its lock given up, with why it did not sell (nil: it sold), gives its place in the
// queue to those waiting (see turnOver for what it does to the stock counted).
func (g *lockGate) enter(ctx context.Context, sku string, qty int64) (passed func(turn error), err error) {
	g.mu.Lock()
	s := g.entry(sku)
	g.letThrough(s) // the stock seen may have gone stale since the last look
	g.readIfUnknown(sku, s)
	if s.live == 0 && g.fits(s, qty) {
		s.queued += qty
		g.mu.Unlock()
		return g.passer(sku, s, qty), nil
	}
	w := &gateWaiter{qty: qty, room: make(chan struct{})}
	s.waiting = append(s.waiting, w)
	s.live++
	g.mu.Unlock()

	select {
	case <-w.room:
		return g.passer(sku, s, qty), nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.room: // let through as its wait ended: its units count until it gives them back
		s.queued -= qty
	default:
		w.gone = true
		s.live--
	}
	g.letThrough(s) // those behind it may fit now
	g.forget(sku, s)
	return nil, fmt.Errorf("waiting beside the lock queue: %w", context.Cause(ctx))
}

// entry is sku's gate, made if missing. Under g.mu.
func (g *lockGate) entry(sku string) *gatedSKU {
	s := g.skus[sku]
	if s == nil {
		s = &gatedSKU{stock: -1}
		g.skus[sku] = s
	}
	return s
}

// passer gives a purchase's units back to the gate, once, when its turn is over.
func (g *lockGate) passer(sku string, s *gatedSKU, qty int64) func(turn error) {
	var once sync.Once
	return func(turn error) {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			s.queued -= qty
			if s.stock >= 0 {
				s.stock = turnOver(s.stock, qty, turn)
			}
			g.letThrough(s)
			g.readIfUnknown(sku, s)
			g.forget(sku, s)
		})
	}
}

// turnOver is the stock counted once a turn for qty units ends with turn: less its units when it
// sold, or may have (its COMMIT unanswered), until the sale or a read says what is left; less
// than qty when it found the stock short of them; as it was when it sold nothing (a lock not
// taken, an error, a rollback), so that the count stays true and the queue as long as before.
func turnOver(stock, qty int64, turn error) int64 {
	switch {
	case turn == nil, errors.Is(turn, errOutcomeUnknown):
		return max(0, stock-qty)
	case errors.Is(turn, inventory.ErrOutOfStock):
		return max(0, min(stock, qty-1))
	}
	return stock
}

// noteStock takes sku's stock as a sale or a restock here left it, or a read showed it; a
// negative stock (a restock of an amount not known) is not known, and read again.
func (g *lockGate) noteStock(sku string, stock int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.skus[sku]
	if s == nil {
		if stock < 0 || len(g.skus) >= maxKnownSKUs {
			return
		}
		s = g.entry(sku)
	}
	s.stock, s.seenAt = stock, g.now()
	s.noted++
	g.letThrough(s)
	g.readIfUnknown(sku, s)
}

// known says whether the stock counted is known, and fresh. Under g.mu.
func (g *lockGate) known(s *gatedSKU) bool {
	return s.stock >= 0 && g.now().Sub(s.seenAt) <= g.fresh
}

// readIfUnknown begins a read of sku's stock when the gate does not know it, unless one is under
// way or failed within gateReadTimeout. A read begun before the stock was last told (noteStock:
// a sale here, a restock) is not taken, and the stock is read again if still not known. A read's
// failure leaves the stock not known. Under g.mu.
func (g *lockGate) readIfUnknown(sku string, s *gatedSKU) {
	if g.read == nil || s.reading || g.known(s) || g.now().Before(s.readAfter) {
		return
	}
	s.reading = true
	noted := s.noted
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), gateReadTimeout)
		defer cancel()
		var stock int64
		var err error
		select {
		case g.reading <- struct{}{}:
			stock, err = g.read(ctx, sku)
			<-g.reading
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		s.reading = false
		switch {
		case err != nil:
			s.readAfter = g.now().Add(gateReadTimeout)
		case s.noted != noted:
			g.readIfUnknown(sku, s) // told since the read began: known now, unless a restock
		default:
			s.stock, s.seenAt = max(0, stock), g.now()
			g.letThrough(s)
		}
		g.forget(sku, s)
	}()
}

// fits says whether qty more units may queue: nobody is queued here (the locked deduction then
// decides), the stock was seen too long ago (it is read again meanwhile), or the units queued
// and these are within the stock. A stock not seen here at all lets one purchase at a time
// queue, until it is read. Under g.mu.
func (g *lockGate) fits(s *gatedSKU, qty int64) bool {
	switch {
	case s.queued == 0:
		return true
	case s.stock < 0:
		return false
	case !g.known(s):
		return true
	}
	return s.queued+qty <= s.stock
}

// letThrough lets the waiting purchases through, in their order, while they fit. Under g.mu.
func (g *lockGate) letThrough(s *gatedSKU) {
	for len(s.waiting) > 0 {
		w := s.waiting[0]
		if !w.gone {
			if !g.fits(s, w.qty) {
				return
			}
			s.queued += w.qty
			s.live--
			close(w.room)
		}
		s.waiting[0] = nil
		s.waiting = s.waiting[1:]
	}
}

// forget drops a SKU that has nothing queued or waiting once the gate holds more SKUs than a
// replica remembers: the stock seen is kept for the SKU's next burst otherwise. Under g.mu.
func (g *lockGate) forget(sku string, s *gatedSKU) {
	if s.queued == 0 && s.live == 0 && !s.reading && len(g.skus) > maxKnownSKUs && g.skus[sku] == s {
		delete(g.skus, sku)
	}
}
