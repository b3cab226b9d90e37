package sale

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// HoldKey holds a change's key for this attempt across the fleet (inventory's key_attempts)
// before the change is admitted, so that while it may still commit no other attempt under the
// key runs, on any replica, nor is told "nothing changed". An earlier attempt's holding is waited
// for, until ctx ends or LOCK_TIMEOUT has passed: then KindInProgress. A key the database cannot
// hold is KindKeyUnchecked. release, called once the change is answered, ends the holding. fresh
// (a key the service made for this request, which nobody can retry) holds nothing.
func (e *Engine) HoldKey(ctx context.Context, key string, fresh bool) (release func(), _ error) {
	if fresh || e.cfg.Lies.NoKeyHold {
		return func() {}, nil
	}
	attempt := newAttempt()
	wctx, cancel := context.WithTimeout(ctx, e.cfg.LockTimeout)
	defer cancel()
	for pause := keyPollFirst; ; pause = min(2*pause, keyPollMax) {
		held, err := e.store().HoldKey(wctx, key, attempt, e.cfg.ReplicaID, e.keyHold())
		e.src.Report(err)
		switch {
		case err != nil && wctx.Err() == nil:
			return nil, &Error{Kind: KindKeyUnchecked, Err: err}
		case held:
			return func() { e.releaseKey(key, attempt) }, nil
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-wctx.Done():
			t.Stop()
			return nil, &Error{Kind: KindInProgress, RetryAfter: time.Second,
				Err: fmt.Errorf("sale: key %q: an earlier attempt may still commit: %w", key, errors.Join(errKeyInFlight, context.Cause(wctx)))}
		}
	}
}

// keyHold is how long a holding lasts unless released: the longest an attempt runs once it holds
// its key (LongestChange), and the commit bound after it, past which none of its COMMITs can
// still apply.
func (e *Engine) keyHold() time.Duration { return e.LongestChange() + e.store().CommitBound() }

// releaseKey ends a holding with a context no request can cancel; a holding not deleted expires.
func (e *Engine) releaseKey(key, attempt string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := e.store().ReleaseKey(ctx, key, attempt); err != nil {
		e.log.Warn("sale: a key's holding was not released: it expires by itself", "request_id", key, "err", err)
	}
}

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

// errKeyInFlight: another attempt under the key held it past the wait.
var errKeyInFlight = errors.New("another attempt under this key is in flight")

// newAttempt names one attempt's holding.
func newAttempt() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
