package sale

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
)

// newRedisLocksAt is a replica's redisLocks on addr, with its client's timeouts.
func newRedisLocksAt(t *testing.T, addr string, ttl time.Duration) *redisLocks {
	user, password := testenv.RedisUser()
	c := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password, DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return &redisLocks{client: c, rs: redsync.New(goredis.NewPool(c)), ttl: ttl}
}

// redisAdmin is a client of Redis's default user, for what a test reads and sets beside the
// locks (the lock's value and expiry), which the modes' ACL user may not.
func redisAdmin(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), Password: testenv.RedisAdminPassword()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// An acquisition given up on while its SET is on the way leaves no lock behind: Redis sets the
// key after the client stopped listening, and a clean-up sent with the request's ended context
// never left, so the key blocked the SKU for its whole TTL. A fresh acquisition of the SKU
// succeeds well within the TTL instead.
func TestRedisCancelledAcquisitionLeavesNoLock(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		name := map[bool]string{false: "redis", true: "redis-fenced"}[fenced]
		t.Run(name, func(t *testing.T) {
			const ttl = 30 * time.Second
			p := tcpproxy.NewRaw(t, testenv.RedisAddr(t))
			slow := newRedisLocksAt(t, p.Addr(), ttl)
			direct := newRedisLocksAt(t, testenv.RedisAddr(t), ttl)
			admin := redisAdmin(t)
			sku := "CANCELLED-" + testenv.UniqueName(t)
			t.Cleanup(func() { _ = admin.Del(context.Background(), lockKey(sku), tokenKey(sku)).Err() })
			if err := slow.client.Ping(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			// Each way, past the client's read timeout: the try lands, its answer comes too late.
			p.SetDelay(1500 * time.Millisecond)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel) // the request leaves (the sold-out poller, say)
			if l, err := slow.lock(ctx, sku, fenced); err == nil {
				_ = l.Unlock(context.Background())
				t.Fatal("a lock taken for a request that had left")
			}
			// The link is well again: a clean-up goes through, and the try lands late, whoever
			// still listens. The SKU is then asked for once it has.
			p.SetDelay(0)
			time.Sleep(3 * time.Second)
			wait, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a third of the TTL
			defer cancel()
			l, err := direct.lock(wait, sku, fenced)
			if err != nil {
				held, _ := admin.Get(context.Background(), lockKey(sku)).Result()
				t.Fatalf("the SKU's lock after an acquisition given up on: %v; the key holds %q (TTL %v)", errors.Unwrap(err), held, ttl)
			}
			_ = l.Unlock(context.Background())
		})
	}
}

// A try answered "yours" because an earlier try of the same holding set the lock (its answer was
// lost) gives the lock its whole TTL again: the lock set then may be near its end, and the
// watchdog's first extension, a third of the TTL after the answer, would come after it expired
// and another replica took it.
func TestRedisRetriedAcquisitionGetsAFullTTL(t *testing.T) {
	const ttl = 9 * time.Second
	r := newRedisLocksAt(t, testenv.RedisAddr(t), ttl)
	admin := redisAdmin(t)
	ctx := context.Background()
	for _, fenced := range []bool{false, true} {
		sku := "RETRIED-" + testenv.UniqueName(t)
		t.Cleanup(func() { _ = admin.Del(context.Background(), lockKey(sku), tokenKey(sku)).Err() })
		name, try, value := "holding-1", acquirePlain, "holding-1"
		if fenced {
			try, value = acquireWithToken, "holding-1:7"
		}
		// What the lost try left: the lock, a moment before it expires.
		if err := admin.Set(ctx, lockKey(sku), value, 300*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := r.acquire(ctx, sku, name, try)
		if err != nil || got <= 0 || fenced && got != 7 {
			t.Fatalf("fenced %v: the retried try answered %d, %v", fenced, got, err)
		}
		left, err := admin.PTTL(ctx, lockKey(sku)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if left < ttl-time.Second {
			t.Errorf("fenced %v: the lock a retried try answered as its own expires in %v, not a TTL (%v) from now", fenced, left, ttl)
		}
	}
}
