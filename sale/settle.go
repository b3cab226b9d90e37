package sale

import (
	"context"
	"errors"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// settle is the one place an unanswered COMMIT is settled, for every change and every batch: it
// resolves the change (ch.resolve) while the locks are still held. Released before, a later
// holder's plain read could miss a COMMIT that applies after it and overwrite it (the lock modes
// without a fence). The resolver ends the transaction before it asks (EndTransaction), so the
// answer is nearly always known. When it is not, the locks are kept while the server still shows
// the transaction's connection (a COMMIT stuck executing there can apply at any time), for at
// most the store's commit bound (waitWhileAlive), then asked again; and when the server cannot be
// asked either, until the commit bound has passed since the COMMIT, after which a COMMIT not yet
// on the server can no longer apply, resolving it again meanwhile (resolveUntil: the server may
// answer again, or, on a cluster, the writer may hold the change, which makes it final). The
// answer is outcome_unknown only then. It takes at most settleBound. An err that is not an
// unanswered COMMIT is returned as it is. Every change's error passes here, and is reported to
// the store's source (a cluster checks its writer at once).
func (e *Engine) settle(ctx context.Context, ch change, err error, log Log) error {
	e.src.Report(err)
	if !errors.Is(err, inventory.ErrOutcomeUnknown) {
		return err
	}
	unanswered := time.Now() // the COMMIT was sent before this
	if count := e.cfg.Metrics.CommitsUnanswered; count != nil {
		for _, sku := range ch.skus {
			count(sku).Inc()
		}
	}
	log.Warn("commit unanswered: asking the database what became of it before the lock is released", "err", err)
	rerr := ch.resolve(ctx, err)
	if errors.Is(rerr, errOutcomeUnknown) && e.waitWhileAlive(ctx, inventory.UnansweredConn(err), log) {
		rerr = ch.resolve(ctx, err)
	}
	if errors.Is(rerr, errOutcomeUnknown) {
		bound := e.store().CommitBound()
		if at, ok := e.src.StoreAt(inventory.UnansweredConn(err).Addr); ok {
			bound = max(bound, at.CommitBound()) // the node the COMMIT went to knows its sessions' wait_timeout
		}
		deadline := unanswered.Add(bound)
		log.Warn("outcome unknown: keeping the lock until the commit can no longer apply, asking meanwhile", "wait", time.Until(deadline).String())
		rerr = e.resolveUntil(ctx, ch, err, rerr, deadline)
	}
	if e.cfg.Lies.UnconfirmedNotSold {
		return errPlantedNotSold
	}
	return rerr
}

// resolveUntil resolves the change again and again until deadline, when a COMMIT not yet on the
// server can no longer apply, and returns the first answer known (the node answers again; or the
// writer, another node, holds the change: resolveKey); rerr, the outcome unknown, at the deadline.
func (e *Engine) resolveUntil(ctx context.Context, ch change, cause, rerr error, deadline time.Time) error {
	for time.Until(deadline) > 0 {
		rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		err := ch.resolve(rctx, cause)
		cancel()
		if !errors.Is(err, errOutcomeUnknown) {
			return err
		}
		time.Sleep(min(max(time.Until(deadline), 0), retryPause))
	}
	return rerr
}

// retryPause is resolveUntil's pause between two resolutions.
const retryPause = 250 * time.Millisecond

// errPlantedNotSold is the planted lie UnconfirmedNotSold's error: answered as not made.
var errPlantedNotSold = errors.New("planted lie: an unconfirmed COMMIT answered as not made")

// settleBound is the longest settle takes: a look-up within resolveBudget, the wait for the
// connection (waitWhileAlive), and a second look-up; or, when the server cannot be asked, the
// commit bound from the COMMIT (resolveUntil's deadline, which its look-ups keep to), which is
// shorter with the store's commit bound.
func (e *Engine) settleBound() time.Duration { return 2*resolveBudget + e.aliveBound() }

// alivePoll is how often waitWhileAlive looks at the connection.
const alivePoll = 200 * time.Millisecond

// aliveBound bounds waitWhileAlive: the store's commit bound, then one more look at the
// connection, and the pause before it.
func (e *Engine) aliveBound() time.Duration {
	return e.store().CommitBound() + alivePoll + releaseTimeout
}

// waitWhileAlive waits while the server conn was on (settledAt) shows the connection conn, on
// which a COMMIT went unanswered, and says whether it saw it gone: then the transaction has
// ended, and its key's orders are final. It gives up (false) when the server cannot be asked, or when the connection
// is still there after the store's commit bound: a COMMIT the resolver's KILL could not stop
// that long is left to the answer outcome_unknown. It takes at most aliveBound.
func (e *Engine) waitWhileAlive(ctx context.Context, conn inventory.ServerConn, log Log) bool {
	if conn.ID == 0 {
		return false
	}
	at, ok := e.src.StoreAt(conn.Addr)
	if !ok {
		return false
	}
	for deadline := time.Now().Add(at.CommitBound()); ; {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		alive, err := at.ConnectionAlive(actx, conn)
		cancel()
		switch {
		case err != nil:
			log.Warn("the unanswered transaction's connection could not be looked up", "err", err)
			return false
		case !alive:
			return true
		case !time.Now().Before(deadline):
			log.Warn("the unanswered transaction is still alive on the server past the commit bound: its outcome is unknown", "conn", conn.ID)
			return false
		}
		time.Sleep(alivePoll)
	}
}
