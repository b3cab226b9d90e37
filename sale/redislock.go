package sale

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// The Redis locks of modes redis and redis-fenced: the lock Go services usually pick, go-redsync
// (SET NX PX with a random value; extend and unlock by compare-and-set scripts), held by a
// watchdog that extends it every third of its expiry (Redisson's pattern). Redis polls: a waiter
// retries after a random delay, so there is no queue and no order.

// redisKeyPrefix namespaces the keys: the lock is lockKey(sku), its token counter tokenKey(sku).
const redisKeyPrefix = "zkstock:lock:sku:"

func lockKey(sku string) string  { return redisKeyPrefix + sku }
func tokenKey(sku string) string { return redisKeyPrefix + sku + ":token" }

// acquireWithToken sets the lock only if it is free and, in the same script, increments the SKU's
// token counter: a token taken by a separate INCR after acquiring would let a holder that paused
// in between come back with a newer token than its successor's. The lock's value is the holding's
// random name, ':' and its token, and the script is idempotent for one name: run again after its
// reply was lost (the server set the lock, the answer never came), it answers the token it gave,
// instead of leaving a lock nobody knows it holds to block the SKU until it expires; and it gives
// the lock its whole expiry again, as a fresh acquisition has it, for the watchdog counts from now.
var acquireWithToken = redis.NewScript(`
local held = redis.call('GET', KEYS[1])
if held then
	local mine = ARGV[1] .. ':'
	if string.sub(held, 1, #mine) == mine then
		redis.call('PEXPIRE', KEYS[1], ARGV[2])
		return tonumber(string.sub(held, #mine + 1))
	end
	return 0
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
return token`)

// acquirePlain is acquireWithToken without a token (mode redis): it sets the lock to the
// holding's random name only if it is free, and is idempotent for one name in the same way.
var acquirePlain = redis.NewScript(`
local held = redis.call('GET', KEYS[1])
if held then
	if held == ARGV[1] then
		redis.call('PEXPIRE', KEYS[1], ARGV[2])
		return 1
	end
	return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)

// dropIfMine deletes the lock if its value is the holding's name, or carries it: the clean-up of
// an acquisition whose outcome could not be learnt.
var dropIfMine = redis.NewScript(`
local held = redis.call('GET', KEYS[1])
local mine = ARGV[1] .. ':'
if held and (held == ARGV[1] or string.sub(held, 1, #mine) == mine) then
	return redis.call('DEL', KEYS[1])
end
return 0`)

// raiseToken lifts the counter to at least ARGV[1]. After Redis lost its data (a restart with
// persistence off) the counter starts again from zero and the database fence refuses every new
// token; raised to the highest Redis token the database has seen written, the next holders are
// accepted again. A holder from before the restart that had not written yet may carry a token
// above that mark and be admitted too: the same danger as lowering a fence (inventory.LowerFence),
// which the claim's row lock keeps from losing an update.
var raiseToken = redis.NewScript(`
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then
	redis.call('SET', KEYS[1], ARGV[1])
	return 1
end
return 0`)

// redisLocks is one replica's connection to Redis for the redis modes, opened on first use.
type redisLocks struct {
	client *redis.Client
	rs     *redsync.Redsync
	ttl    time.Duration
}

// redisClient opens the redis modes' client on first use, and closes it once.
type redisClient struct {
	once  sync.Once
	locks *redisLocks
}

// redisLocks is the engine's Redis client, opened on first use with the engine's RedisConfig.
// redisLocks is the redis modes' client, opened on first use; nil once the engine is closed
// (redisClient.close) without one having been opened.
func (e *Engine) redisLocks() *redisLocks {
	e.redis.once.Do(func() {
		rc := e.cfg.Redis
		c := redis.NewClient(&redis.Options{Addr: rc.Addr, Username: rc.Username, Password: rc.Password, DialTimeout: time.Second,
			ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1})
		ttl := rc.LockTTL
		if ttl <= 0 {
			ttl = 10 * time.Second
		}
		e.redis.locks = &redisLocks{client: c, rs: redsync.New(goredis.NewPool(c)), ttl: ttl}
	})
	return e.redis.locks
}

// close closes the client if it was opened; none is opened after it.
func (r *redisClient) close() {
	r.once.Do(func() {})
	if r.locks != nil {
		_ = r.locks.client.Close()
	}
}

// retryDelay is redsync's own: a random 50 to 250 ms between tries.
func retryDelay(int) time.Duration { return time.Duration(50+rand.IntN(200)) * time.Millisecond }

// lock takes the SKU's Redis lock, fenced (with a token from the counter) or not, waiting until
// ctx ends; the watchdog then keeps it until Unlock, or until an extension fails. The lock is
// taken by one idempotent script (acquireWithToken, acquirePlain) under a random name, so that
// a try whose answer was lost, or came after ctx ended, leaves no lock nobody holds (acquire).
func (r *redisLocks) lock(ctx context.Context, sku string, fenced bool) (*redisLease, error) {
	name, err := randomValue()
	if err != nil {
		return nil, err
	}
	try := acquirePlain
	if fenced {
		try = acquireWithToken
	}
	got, err := r.acquire(ctx, sku, name, try)
	if err != nil {
		return nil, err
	}
	value, token := name, int64(0)
	if fenced {
		value, token = fmt.Sprintf("%s:%d", name, got), got
	}
	m := r.rs.NewMutex(lockKey(sku), redsync.WithExpiry(r.ttl), redsync.WithValue(value))
	return newRedisLease(m, r.ttl, token), nil
}

// acquire polls the script try as redsync polls SET NX, until it answers a positive number (the
// token, or 1), which it returns. A try whose answer was lost is tried again with the same name,
// which answers what the lost one did. When ctx ends before an answer came, or Redis fails, the
// lock is dropped (dropLost) if the lost try took it: never with ctx, which has ended.
func (r *redisLocks) acquire(ctx context.Context, sku, name string, try *redis.Script) (int64, error) {
	// uncertain: a try was sent and never answered, so Redis may run it, now or a little later
	// (a script queued behind a paused server runs when it resumes, whoever still listens).
	uncertain := false
	for n := 0; ; n++ {
		got, err := try.Run(ctx, r.client, []string{lockKey(sku), tokenKey(sku)}, name, r.ttl.Milliseconds()).Int64()
		var timeout net.Error
		switch {
		case err == nil && got > 0:
			return got, nil
		case err == nil: // someone else holds it; an earlier unanswered try may still run
		case errors.As(err, &timeout) && timeout.Timeout(), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			uncertain = true // sent, no answer: the next try, or the clean-up, tells
		default: // Redis refused or is unreachable: say so now, as redsync does
			if uncertain {
				r.dropLost(sku, name)
			}
			return 0, fmt.Errorf("redis lock %s: %w", sku, err)
		}
		t := time.NewTimer(retryDelay(n))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if uncertain {
				r.dropLost(sku, name)
			}
			return 0, fmt.Errorf("redis lock %s: %w", sku, errors.Join(ctx.Err(), err))
		}
	}
}

// dropLost deletes a lock an unanswered try may have taken: now, and once more after the client's
// read timeout, for a try that Redis runs late. It runs in the background with contexts of its
// own; at worst the lock expires with its TTL.
func (r *redisLocks) dropLost(sku, name string) {
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		_ = dropIfMine.Run(ctx, r.client, []string{lockKey(sku)}, name).Err() // best effort, said above
	}
	go func() {
		drop()
		time.Sleep(2 * r.client.Options().ReadTimeout)
		drop()
	}()
}

// raiseTokenTo lifts the SKU's token counter to the database's fence (see raiseToken).
func (r *redisLocks) raiseTokenTo(ctx context.Context, sku string, fence int64) (bool, error) {
	n, err := raiseToken.Run(ctx, r.client, []string{tokenKey(sku)}, fence).Int()
	return n == 1, err
}

// randomValue names one holding, as redsync's own values do: only its holder can extend or
// delete the lock.
func randomValue() (string, error) {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", fmt.Errorf("redis lock value: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
