package lockbench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// The Redis lock that Go services usually pick, as the order service's mode redis takes it:
// go-redsync with its own retry schedule (a random 50 to 250 ms between tries, so a waiter polls
// and there is no queue), each contender on a connection of its own.

const redisExpiry = 10 * time.Second

func newRedisContender(addr, password, path string) *contender {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, PoolSize: 1})
	m := redsync.New(goredis.NewPool(c)).NewMutex("zkstock:bench:"+path, redsync.WithExpiry(redisExpiry),
		redsync.WithTries(math.MaxInt32), redsync.WithRetryDelayFunc(func(int) time.Duration {
			return time.Duration(50+rand.IntN(200)) * time.Millisecond
		}))
	return &contender{
		lock: func(ctx context.Context) (func() error, error) {
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return func() error {
				if ok, err := m.UnlockContext(context.WithoutCancel(ctx)); err != nil || !ok {
					return fmt.Errorf("redis unlock: ok %v, %w", ok, err)
				}
				return nil
			}, nil
		},
		close: func() { _ = c.Close() },
	}
}

// redisCommands is the number of commands the server has run, from INFO commandstats, less the
// INFO calls themselves.
func redisCommands(ctx context.Context, addr, password string) (int64, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password})
	defer c.Close()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO commandstats: %w", err)
	}
	var total int64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, stats, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("redis INFO commandstats: %q: %w", sc.Text(), err)
				}
				total += n
			}
		}
	}
	return total, nil
}
