package sale

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// holdKey holds a change's key for this attempt, which arrived at arrived, across the fleet
// (inventory's key_attempts) before the change is admitted, so that while it may still commit no
// other attempt under the key runs, on any replica, nor is told "nothing changed". An earlier
// attempt's holding is waited for, until ctx ends or LOCK_TIMEOUT has passed: then
// KindInProgress. A key the database cannot hold (its statement failed, or ran out of time), or
// whose first try, answered later than keyHoldWithin after the attempt arrived, found another
// attempt's holding, is KindKeyUnchecked: nothing is tried. late: held, but past keyHoldWithin
// (a first try answered so, or a later one, behind another attempt's holding or a failed try);
// the caller makes nothing then, and answers a replay if an order says the change was made.
// release, called once the change is answered, ends the holding (unless keepKey said
// otherwise). made says whether an order is recorded under one of orderKeys as the key is held;
// a nil release with made: another attempt holds the key, and an order is recorded under it.
// fresh (a key the service made for this request, which nobody can retry) holds nothing.
func (e *Engine) holdKey(ctx context.Context, arrived time.Time, key string, fresh bool, orderKeys []string) (release func(), made, late bool, _ error) {
	if fresh || e.cfg.Lies.NoKeyHold {
		return func() {}, false, false, nil
	}
	hold := e.keyHold()
	waitUntil := arrived.Add(e.cfg.LockTimeout) // for another attempt's holding
	failures := 0
	for try, pause := 0, keyPollFirst; ; try, pause = try+1, min(2*pause, keyPollMax) {
		attempt := newAttempt()                                                                    // a try's own: a failed try's release deletes only its own row
		sctx, cancel := context.WithDeadline(ctx, maxTime(waitUntil, time.Now().Add(time.Second))) // the statement's own bound
		held, made, err := e.store().HoldKey(sctx, key, attempt, e.cfg.ReplicaID, hold, orderKeys...)
		cancel()
		e.src.Report(err)
		// Answered past keyHoldWithin (held up before the database, or behind another attempt's
		// holding, or a failed try): a retry sent since may have been answered, "nothing changed",
		// without seeing this attempt, so it makes nothing, unless an order says it was made.
		tooLate := err == nil && time.Since(arrived) > keyHoldWithin
		switch {
		case held:
			e.keysHeld.Add(1)
			return func() { e.keysHeld.Add(-1); e.releaseKey(key, attempt, hold) }, made, tooLate, nil
		case err != nil:
			e.releaseKey(key, attempt, hold) // the INSERT may have applied, its reply lost
			if failures++; failures > keyTries || ctx.Err() != nil || time.Now().After(waitUntil) {
				return nil, false, false, &Error{Kind: KindKeyUnchecked, Err: err}
			}
		case made:
			// Another attempt holds the key, and an order is recorded under it: the change was
			// made, whatever that attempt was told. Answered as a replay, holding nothing.
			return nil, true, false, nil
		case try == 0 && tooLate:
			return nil, false, false, heldLate(key, arrived)
		case time.Now().Add(pause).After(waitUntil) || ctx.Err() != nil:
			return nil, false, false, inProgress(key)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// keyHoldWithin bounds the time from an attempt's arrival to the answer of its first hold: a
// client that retries at least this long after it sent an attempt finds that attempt's holding,
// or that attempt never holds and makes nothing. Generous, as a burst queues for the replica's
// connections: at 0.5 s a burst of 240 buyers drew key_unavailable.
const keyHoldWithin = 2 * time.Second

// heldLate refuses an attempt whose key was held past keyHoldWithin after it arrived.
func heldLate(key string, arrived time.Time) *Error {
	return &Error{Kind: KindKeyUnchecked, Err: fmt.Errorf("sale: key %q held %v after the request arrived: %w", key, time.Since(arrived).Round(time.Millisecond), errHeldLate)}
}

// errHeldLate: the key's first hold was answered past keyHoldWithin.
var errHeldLate = errors.New("the key was held too late to be known to a retry")

// keepKey keeps key held past its attempt's answer, until the holding expires: the change's
// outcome is not known, and its COMMIT may still apply (a COMMIT stuck on the server).
func (e *Engine) keepKey(key string) {
	if v, ok := e.checkedKeys.Load(key); ok {
		v.(*atomic.Bool).Store(true)
	}
}

// keepIfUnknown keeps key held (keepKey) when err leaves the change's outcome unknown, and
// returns err.
func (e *Engine) keepIfUnknown(key string, err error) error {
	var se *Error
	if errors.As(err, &se) && se.Kind == KindOutcomeUnknown {
		e.keepKey(key)
	}
	return err
}

// KeysHeld is how many keys this replica holds for changes not yet answered.
func (e *Engine) KeysHeld() int64 { return e.keysHeld.Load() }

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// keyTries is how many times a key's holding or look-up is tried again after a failure (a
// connection the server dropped) before the attempt is refused KindKeyUnchecked: a database that
// is down is refused at once.
const keyTries = 2

// HoldPurchase holds a purchase's key (holdKey) and answers the purchase from the orders table
// when an earlier attempt under the key made it (replayed), before the fleet is asked to admit it
// (with the returned context, which carries the change's deadline from its arrival):
// so that every "nothing was sold" given after it is true of the key as of the look-up, and
// nothing but this attempt can sell under the key until release. A look-up that fails is
// KindKeyUnchecked; a key used for another purchase, KindKeyReused. A purchase of a product
// suspected sold out may be answered out_of_stock first, holding nothing (soldout_unheld.go).
func (e *Engine) HoldPurchase(ctx context.Context, p inventory.Purchase) (_ context.Context, release func(), res inventory.Result, replayed bool, _ error) {
	arrived := time.Now()
	clientKey := p.RequestID
	if p.NewKey {
		clientKey = ""
	}
	if e.soldOut.shortBeforeHold(ctx, p.SKU, p.Qty, clientKey) {
		e.cfg.Metrics.SoldOutBeforeQueue.Inc()
		e.soldOutFast.Add(1)
		return ctx, nil, res, false, typed(inventory.ErrOutOfStock)
	}
	return holdAndReplay(e, ctx, arrived, p.RequestID, p.NewKey, []string{p.RequestID}, func(ctx context.Context) (inventory.Result, bool, error) {
		return e.store().PurchaseByKey(ctx, p)
	})
}

// HoldCart is HoldPurchase for a cart.
func (e *Engine) HoldCart(ctx context.Context, cart inventory.Cart) (_ context.Context, release func(), res inventory.CartResult, replayed bool, _ error) {
	return holdAndReplay(e, ctx, time.Now(), cart.RequestID, cart.NewKey, cart.Keys(), func(ctx context.Context) (inventory.CartResult, bool, error) {
		return e.store().CartByKey(ctx, cart)
	})
}

// HoldCancel is HoldPurchase for a cancellation of order id, which allowed may cancel: held
// under the order's CancelKey, answered as a replay when the order is cancelled already.
func (e *Engine) HoldCancel(ctx context.Context, id int64, allowed func(inventory.Order) bool) (_ context.Context, release func(), res inventory.CancelResult, replayed bool, _ error) {
	return holdAndReplay(e, ctx, time.Now(), inventory.CancelKey(id), false, nil, func(ctx context.Context) (inventory.CancelResult, bool, error) {
		o, found, err := e.store().OrderByID(ctx, id)
		if err != nil || !found || !allowed(o) || o.CancelledAt == nil {
			return inventory.CancelResult{}, false, err // Cancel answers an unknown order, or a wrong key
		}
		prod, err := e.store().Product(ctx, o.SKU)
		if err != nil {
			return inventory.CancelResult{}, false, err
		}
		return inventory.CancelResult{Order: o, Remaining: prod.Stock, Replayed: true}, true, nil
	})
}

// holdAndReplay holds key and looks up what an earlier attempt under it made: at once when no
// orderKeys are given, else only when the holding found an order under one of them.
func holdAndReplay[R any](e *Engine, ctx context.Context, arrived time.Time, key string, fresh bool, orderKeys []string, made func(context.Context) (R, bool, error)) (_ context.Context, _ func(), res R, replayed bool, _ error) {
	// The change's deadline, from its arrival: its wait here counts against it (Admit).
	ctx, end := context.WithDeadline(ctx, arrived.Add(e.cfg.LockTimeout+e.txBudget()))
	release, recorded, late, err := e.holdKey(ctx, arrived, key, fresh, orderKeys)
	if err != nil {
		end()
		return ctx, nil, res, false, err
	}
	if late { // held too late to change anything: a replay if an order says it was made
		var found bool
		if len(orderKeys) == 0 || recorded { // else the holding found no order under them
			res, found, err = made(ctx)
			e.src.Report(err)
		}
		if err == nil && found {
			return ctx, func() { end(); release() }, res, true, nil
		}
		end()
		release()
		switch {
		case errors.Is(err, inventory.ErrKeyReused):
			return ctx, nil, res, false, typed(err)
		case err != nil:
			return ctx, nil, res, false, &Error{Kind: KindKeyUnchecked, Err: fmt.Errorf("%w; its orders not looked up: %w", heldLate(key, arrived).Err, err)}
		}
		return ctx, nil, res, false, heldLate(key, arrived)
	}
	if release == nil { // held by another attempt, made: a replay, a key reused, or not known yet
		res, found, err := made(ctx)
		e.src.Report(err)
		switch {
		case err == nil && found:
			return ctx, end, res, true, nil
		case errors.Is(err, inventory.ErrKeyReused): // the order under the key says so, whatever that attempt does
			end()
			return ctx, nil, res, false, typed(err)
		}
		end()
		return ctx, nil, res, false, inProgress(key)
	}
	ended := func() { end(); release() }
	if fresh || e.cfg.Lies.NoKeyHold {
		return ctx, ended, res, false, nil
	}
	if len(orderKeys) > 0 && !recorded {
		return ctx, e.checked(key, end, release), res, false, nil
	}
	res, found, err := made(ctx)
	for try := 0; err != nil && try < keyTries && ctx.Err() == nil && !errors.Is(err, inventory.ErrKeyReused); try++ {
		e.src.Report(err)
		time.Sleep(keyPollFirst << try)
		res, found, err = made(ctx)
	}
	e.src.Report(err)
	switch {
	case errors.Is(err, inventory.ErrKeyReused):
		ended()
		return ctx, nil, res, false, typed(err)
	case err != nil:
		ended()
		return ctx, nil, res, false, &Error{Kind: KindKeyUnchecked, Err: fmt.Errorf("sale: look up key %q: %w", key, err)}
	case found:
		return ctx, ended, res, true, nil
	}
	return ctx, e.checked(key, end, release), res, false, nil
}

// checked records key as held and found free (noOrderUnder) until the change is answered; the
// returned end releases it then, unless keepKey kept it.
func (e *Engine) checked(key string, end, release func()) func() {
	kept := new(atomic.Bool)
	e.checkedKeys.Store(key, kept)
	return func() {
		e.checkedKeys.Delete(key)
		end()
		if kept.Load() {
			e.keysHeld.Add(-1) // answered; the holding is left to expire
			return
		}
		release()
	}
}

// noOrderUnder says that no order holds key but one this attempt makes: the key is fresh, or
// this replica holds it and found it free after holding it (holdAndReplay). The look-ups of the
// key before the lock are then skipped; the locked deduction's own still runs.
func (e *Engine) noOrderUnder(key string, fresh bool) bool {
	if fresh {
		return true
	}
	_, checked := e.checkedKeys.Load(key)
	return checked
}

// keyHold is how long a holding lasts unless released: the longest an attempt runs once it holds
// its key (LongestChange), and the commit bound after it, past which none of its COMMITs can
// still apply.
func (e *Engine) keyHold() time.Duration { return e.LongestChange() + e.store().CommitBound() }

// sweepKeys deletes, every keySweepEvery until Close, the holdings that expired keySweepEvery ago
// (a crashed replica's, that no retry took over).
func (e *Engine) sweepKeys() {
	t := time.NewTicker(keySweepEvery)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		if _, err := e.store().SweepKeys(ctx, keySweepEvery, 1000); err != nil {
			e.log.Debug("sale: expired keys not swept", "err", err)
		}
		cancel()
	}
}

// keySweepEvery is sweepKeys' period.
const keySweepEvery = time.Minute

// The pauses between two looks at a key another attempt holds.
const (
	keyPollFirst = 20 * time.Millisecond
	keyPollMax   = 200 * time.Millisecond
)

// inProgress is the answer to an attempt whose key another attempt holds.
func inProgress(key string) *Error {
	return &Error{Kind: KindInProgress, RetryAfter: time.Second, Err: fmt.Errorf("sale: key %q: %w", key, errKeyInFlight)}
}

// errKeyInFlight: another attempt under the key held it past the wait.
var errKeyInFlight = errors.New("an earlier attempt under this key is in flight, and may still commit")

// newAttempt names one attempt's holding.
func newAttempt() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
