package order_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// Redis with persistence off forgets its token counter when it restarts: the counter starts again
// from zero and the database fence refuses every token it hands out. The refused purchase, which
// wrote nothing, raises the counter to the fence and tries again: sales go on, and no accepted
// token is ever below one the fence saw.
func TestRedisFencedRecoversFromALostCounter(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), Password: testenv.RedisAdminPassword()})
	t.Cleanup(func() { _ = rdb.Close() })
	rs := newCluster(t, 2, clusterOpts{Mode: order.ModeRedisFenced})
	sku := "REDIS-RESTART"
	resetStock(t, rs[0], sku, 100)
	for i := range 5 {
		if r := buy(t, rs[i%2], sku, 1, fmt.Sprintf("before-%d", i)); r.status != 201 {
			t.Fatalf("purchase before the loss: %d %s", r.status, r.raw)
		}
	}
	tokenKey := "zkstock:lock:sku:" + sku + ":token"
	ctx := context.Background()
	before, err := rdb.Get(ctx, tokenKey).Int64()
	if err != nil || before < 5 {
		t.Fatalf("token counter %d (%v): want one token per purchase", before, err)
	}
	// What a restart without persistence leaves: no lock, no counter.
	if err := rdb.Del(ctx, tokenKey, "zkstock:lock:sku:"+sku).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if r := buy(t, rs[i%2], sku, 1, fmt.Sprintf("after-%d", i)); r.status != 201 {
			t.Fatalf("purchase after the loss: %d %s", r.status, r.raw)
		}
	}
	after, err := rdb.Get(ctx, tokenKey).Int64()
	if err != nil || after <= before {
		t.Fatalf("counter %d after recovery (%v): want above the %d the fence had seen", after, err, before)
	}
	a := auditOf(t, rs[0], sku)
	if a.Orders != 10 || a.Stock != 90 || a.Oversold != 0 || a.LostUpdates != 0 {
		t.Fatalf("audit %+v: want 10 orders and stock 90", a)
	}
}

// The watchdog keeps a lock held past its expiry: a purchase whose work takes longer than the TTL
// still commits, and nobody else gets in meanwhile.
func TestRedisWatchdogExtendsTheLock(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), Password: testenv.RedisAdminPassword()})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, mode := range []order.LockMode{order.ModeRedis, order.ModeRedisFenced} {
		t.Run(string(mode), func(t *testing.T) {
			rs := newCluster(t, 1, clusterOpts{Mode: mode, WorkDelay: 5 * time.Second}) // TTL 3 s in tests
			sku := "REDIS-WATCHDOG-" + string(mode)
			resetStock(t, rs[0], sku, 10)
			done := make(chan reply, 1)
			go func() { done <- buy(t, rs[0], sku, 1, "long-"+string(mode)) }()
			time.Sleep(4 * time.Second) // past the 3 s expiry
			ttl, err := rdb.PTTL(context.Background(), "zkstock:lock:sku:"+sku).Result()
			if err != nil || ttl <= 0 {
				t.Fatalf("lock key's expiry %v (%v) after 4 s: the watchdog did not extend it", ttl, err)
			}
			if r := <-done; r.status != 201 {
				t.Fatalf("the long purchase: %d %s", r.status, r.raw)
			}
		})
	}
}

// Without Redis the Redis modes sell nothing: every purchase answers 503 lock_unavailable.
func TestRedisDownSellsNothing(t *testing.T) {
	for _, mode := range []order.LockMode{order.ModeRedis, order.ModeRedisFenced} {
		t.Run(string(mode), func(t *testing.T) {
			rs := newCluster(t, 1, clusterOpts{Mode: mode, RedisAddr: "127.0.0.1:1", LockTimeout: 2 * time.Second})
			sku := "REDIS-DOWN-" + string(mode)
			resetStock(t, rs[0], sku, 10)
			for i := range 3 {
				if r := buy(t, rs[0], sku, 1, fmt.Sprintf("down-%s-%d", mode, i)); r.status != 503 || r.code() != "lock_unavailable" {
					t.Fatalf("purchase without Redis: %d %s, want 503 lock_unavailable", r.status, r.raw)
				}
			}
			if a := auditOf(t, rs[0], sku); a.Orders != 0 || a.Stock != 10 {
				t.Fatalf("audit %+v: something was sold without a lock", a)
			}
		})
	}
}

// The redis modes' ACL user (REDIS_USERNAME; scripts/servers.sh's users.acl) runs the modes (the
// tests above use it) and nothing else: no FLUSHALL, CONFIG, KEYS, INFO or CLIENT, no key outside
// zkstock:lock:*, not even from inside a script; without a password the server refuses everyone.
// Against a Redis whose default user is open, as servers.sh ran it before, every line fails.
func TestRedisUserHasOnlyTheLockKeys(t *testing.T) {
	user, password := testenv.RedisUser()
	if user == "" {
		if testenv.RedisAdminPassword() != "" { // scripts/servers.sh's Redis: it must have the user
			t.Fatal("REDIS_ADMIN_PASSWORD is set but REDIS_USERNAME is not: the redis modes would run as the default user")
		}
		t.Skip("REDIS_USERNAME is not set: a Redis without ACL users")
	}
	ctx := context.Background()
	svc := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), Username: user, Password: password})
	t.Cleanup(func() { _ = svc.Close() })
	key := "zkstock:lock:sku:ACL-" + testenv.UniqueName(t)
	if err := svc.Set(ctx, key, "v", time.Second).Err(); err != nil {
		t.Fatalf("SET %s as %s: %v", key, user, err)
	}
	denied := func(what string, err error) {
		t.Helper()
		// NOPERM, or inside a script ERR with the ACL's refusal.
		if err == nil || !(strings.HasPrefix(err.Error(), "NOPERM") || strings.Contains(err.Error(), "can't run this command") ||
			strings.Contains(err.Error(), "No permissions")) {
			t.Errorf("%s as %s: %v, want the ACL's refusal", what, user, err)
		}
	}
	denied("FLUSHALL", svc.FlushAll(ctx).Err())
	denied("CONFIG GET", svc.ConfigGet(ctx, "*").Err())
	denied("CONFIG SET", svc.ConfigSet(ctx, "appendonly", "yes").Err())
	denied("KEYS", svc.Keys(ctx, "*").Err())
	denied("INFO", svc.Info(ctx).Err())
	denied("CLIENT LIST", svc.ClientList(ctx).Err())
	denied("ACL SETUSER", svc.Do(ctx, "ACL", "SETUSER", user, "+@all").Err())
	denied("SET outside zkstock:lock:*", svc.Set(ctx, "other:key", "v", time.Second).Err())
	denied("GET outside zkstock:lock:*", svc.Get(ctx, "zkstock:fleet").Err())
	denied("EVAL on a key outside", svc.Eval(ctx, "return redis.call('SET', KEYS[1], '1')", []string{"other:key"}).Err())
	denied("FLUSHALL inside EVAL", svc.Eval(ctx, "return redis.call('FLUSHALL')", []string{key}).Err())
	anon := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { _ = anon.Close() })
	if err := anon.Get(ctx, key).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("GET without a password: %v, want NOAUTH", err)
	}
}
