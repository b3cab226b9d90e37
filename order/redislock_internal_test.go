package order

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
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second,
		WriteTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return &redisLocks{client: c, rs: redsync.New(goredis.NewPool(c)), ttl: ttl}
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
			sku := "CANCELLED-" + testenv.UniqueName(t)
			t.Cleanup(func() { _ = direct.client.Del(context.Background(), lockKey(sku), tokenKey(sku)).Err() })
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
				held, _ := direct.client.Get(context.Background(), lockKey(sku)).Result()
				t.Fatalf("the SKU's lock after an acquisition given up on: %v; the key holds %q (TTL %v)", errors.Unwrap(err), held, ttl)
			}
			_ = l.Unlock(context.Background())
		})
	}
}
