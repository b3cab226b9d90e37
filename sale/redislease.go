package sale

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
)

var errRedisLockExpired = errors.New("the Redis lock could not be extended: it may have expired")

// redisLease is one holding of a Redis lock, kept alive by its watchdog.
type redisLease struct {
	m      *redsync.Mutex
	token  int64
	lost   chan struct{}
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{}

	once     sync.Once
	lostOnce sync.Once
	err      error
}

func newRedisLease(m *redsync.Mutex, ttl time.Duration, token int64) *redisLease {
	l := &redisLease{m: m, token: token, lost: make(chan struct{}), stop: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	go l.watchdog(ttl)
	return l
}

// watchdog extends the lock every third of its expiry. It runs in the holder's process: a paused
// process pauses its watchdog too, and the lock expires under it.
func (l *redisLease) watchdog(ttl time.Duration) {
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
			ok, err := l.m.ExtendContext(ctx)
			cancel()
			if !ok || err != nil {
				l.markLost(fmt.Errorf("%w (%v)", errRedisLockExpired, err))
				return
			}
		}
	}
}

func (l *redisLease) markLost(err error) {
	l.lostOnce.Do(func() {
		l.cancel(err) // before Lost: whoever wakes on it finds the context ended
		close(l.lost)
	})
}

// Token is the fencing token issued with the lock (redis-fenced), 0 for the unfenced lock.
func (l *redisLease) Token() int64 { return l.token }

// Lost closes when the watchdog fails to extend the lock.
func (l *redisLease) Lost() <-chan struct{} { return l.lost }

// Context is cancelled when the lock is lost or released.
func (l *redisLease) Context() context.Context { return l.ctx }

// Unlock stops the watchdog and deletes the lock if it is still ours.
func (l *redisLease) Unlock(ctx context.Context) error {
	l.once.Do(func() {
		close(l.stop)
		ok, err := l.m.UnlockContext(ctx)
		switch {
		case err != nil:
			l.err = fmt.Errorf("redis unlock: %w", err)
		case !ok:
			l.err = errRedisLockExpired
		}
		l.cancel(errors.New("unlocked"))
	})
	return l.err
}
