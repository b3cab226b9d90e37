package sale

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// keyReleases ends the holdings of answered changes in the background, many in one statement: an
// answer never waits for its key's release, and a holding the database did not delete is tried
// again, with the others, until it would have expired anyway.
type keyReleases struct {
	mu      sync.Mutex
	pending []pendingRelease
	wake    chan struct{} // one token: there is something to release
}

type pendingRelease struct {
	held  inventory.HeldKey
	until time.Time // the holding expires by then: nothing left to release
}

// releaseBatch bounds one statement's holdings.
const releaseBatch = 500

// releaseKey hands a holding, which expires hold from now, to the release worker.
func (e *Engine) releaseKey(key, attempt string, hold time.Duration) {
	r := &e.releases
	now := time.Now()
	r.mu.Lock()
	if len(r.pending) >= maxPendingReleases { // an outage: drop those expired, then the oldest
		r.pending = slices.DeleteFunc(r.pending, func(p pendingRelease) bool { return !now.Before(p.until) })
		if len(r.pending) >= maxPendingReleases {
			r.pending = r.pending[len(r.pending)-maxPendingReleases/2:] // the rest expire by themselves
		}
	}
	r.pending = append(r.pending, pendingRelease{inventory.HeldKey{Key: key, Attempt: attempt}, now.Add(hold)})
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// maxPendingReleases bounds the holdings waiting for the database to take their release.
const maxPendingReleases = 100_000

// releaseWorker deletes the pending holdings until Close, backing off while the database fails:
// a wake-up before the next try is due waits for it.
func (e *Engine) releaseWorker() {
	r := &e.releases
	var pause time.Duration
	var retry *time.Timer
	for {
		var due <-chan time.Time
		if retry != nil {
			due = retry.C
		}
		select {
		case <-e.stop:
			return
		case <-r.wake:
			if retry != nil {
				continue // failing: the try that is due comes with the timer
			}
		case <-due:
			retry = nil
		}
		if e.releasePending() {
			pause = 0
			continue
		}
		pause = min(max(2*pause, keyPollMax), 2*time.Second)
		retry = time.NewTimer(pause)
	}
}

// releasePending deletes up to releaseBatch pending holdings at a time, dropping those expired;
// false when the database did not take them (they stay pending).
func (e *Engine) releasePending() bool {
	r := &e.releases
	for {
		r.mu.Lock()
		now := time.Now()
		var batch []pendingRelease
		live := r.pending[:0]
		for _, p := range r.pending {
			switch {
			case !now.Before(p.until): // expired: nothing to delete
			case len(batch) < releaseBatch:
				batch = append(batch, p)
			default:
				live = append(live, p)
			}
		}
		r.pending = live
		r.mu.Unlock()
		if len(batch) == 0 {
			return true
		}
		held := make([]inventory.HeldKey, len(batch))
		for i, p := range batch {
			held[i] = p.held
		}
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		err := e.store().ReleaseKeys(ctx, held)
		cancel()
		if err != nil {
			e.log.Debug("sale: holdings not released yet; trying again", "keys", len(held), "err", err)
			r.mu.Lock()
			r.pending = append(r.pending, batch...)
			r.mu.Unlock()
			return false
		}
	}
}
