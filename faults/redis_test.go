package faults

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkstock/zkstock/internal/testenv"
)

// The Redis scenarios run in both Redis modes and, as the control, in zk.
var redisModes = []string{"redis", "redis-fenced", "zk"}

func inRedisModes(t *testing.T, scenario func(t *testing.T, mode string)) {
	for _, mode := range redisModes {
		t.Run(mode, func(t *testing.T) { scenario(t, mode) })
	}
}

func redisClient(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), Password: testenv.RedisAdminPassword()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitHeld waits until owner holds sku's lock: the Redis key for the redis modes, the queue for zk.
func waitHeld(t *testing.T, mode string, rdb *redis.Client, observer *replica, sku, owner string) {
	t.Helper()
	if mode == "zk" {
		waitHolder(t, observer, sku, owner, 10*time.Second)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Exists(context.Background(), "zkstock:lock:sku:"+sku).Val() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%s never held the Redis lock of %s", owner, sku)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// restartRedis stops Redis, keeps it down for a while and starts it again (empty: no persistence).
// It returns when Redis answers, with the moment just before it was started.
func restartRedis(t *testing.T, down time.Duration) (startedAt time.Time) {
	t.Helper()
	dir := os.Getenv("REDIS_DIR")
	testenv.ServersScript(t, "stop-server", dir)
	time.Sleep(down)
	startedAt = time.Now()
	testenv.ServersScript(t, "start-server", dir)
	rdb := redisClient(t)
	deadline := time.Now().Add(20 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis did not come back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return startedAt
}

// Scenario 9: the holder pauses (SIGSTOP, a stop-the-world pause or a frozen VM) for longer than
// the Redis lock's expiry and the ZooKeeper session. The watchdog pauses with the process, so the
// Redis lock expires under it and another replica sells; the woken holder finishes its purchase
// on what it read before.
func TestHolderPausedPastLease(t *testing.T) { inRedisModes(t, testHolderPausedPastLease) }

func testHolderPausedPastLease(t *testing.T, mode string) {
	dsn := testenv.MySQLDatabase(t)
	rdb := redisClient(t)
	settings := []string{"REDIS_LOCK_TTL=2s", "ZK_SESSION_TIMEOUT=2s", "WORK_DELAY=1s", "LOCK_TIMEOUT=30s", "LOCK_MODE=" + mode}
	ensemble := testenv.ZKEnsemble(t)
	holder := startReplicas(t, 1, dsn, ensemble, settings...)[0]
	other := startReplicas(t, 1, dsn, ensemble, append(settings, "REPLICA_ID=order2")...)[0]
	other.name = "order2"
	sku := "F-PAUSE-" + mode
	reset(t, other, sku, 10)

	answers := make(chan struct {
		key string
		o   outcome
	}, 4)
	buy := func(r *replica, key string) {
		st, m := call("POST", r.url+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku), "Idempotency-Key", key)
		code, _ := m["code"].(string)
		answers <- struct {
			key string
			o   outcome
		}{key, outcome{status: st, code: code, at: time.Now()}}
	}
	go buy(holder, "stale")
	waitHeld(t, mode, rdb, other, sku, "order1")
	time.Sleep(300 * time.Millisecond) // past its read of the stock, inside its 1 s of work
	holder.signal(syscall.SIGSTOP)
	pausedAt := time.Now()
	time.Sleep(3500 * time.Millisecond) // past the 2 s expiry and the 2 s session
	go func() {
		for i := range 3 {
			buy(other, fmt.Sprintf("fresh-%d", i))
		}
	}()
	outcomes := map[string]outcome{}
	collect := func() {
		select {
		case a := <-answers:
			outcomes[a.key] = a.o
		case <-time.After(60 * time.Second):
			t.Fatal("purchases did not finish")
		}
	}
	if mode == "redis" {
		for len(outcomes) < 3 { // nothing holds order2 back: the woken holder writes last
			collect()
		}
	} else {
		time.Sleep(2 * time.Second) // order2 waits behind the paused holder's fence claim
	}
	holder.signal(syscall.SIGCONT)
	pause := time.Since(pausedAt)
	for len(outcomes) < 4 {
		collect()
	}
	a, codes := verdict(t, dsn, sku, outcomes, mode != "redis")
	stale := outcomes["stale"]
	corrupted := a.LostUpdates != 0 || a.Oversold != 0
	t.Logf("stale holder answered %d %s; answers %v; audit %+v", stale.status, stale.code, codes, a)
	did := fmt.Sprintf("the woken holder answered %d %s", stale.status, stale.code)
	switch {
	case corrupted:
		did = "the lock expired during the pause and order2 sold; the woken holder wrote the stock it had read before (201): **corrupted**"
	case stale.status == 503 && stale.code == "stale_token":
		did = "the woken holder's transaction carried an older token than order2's and was refused by the fence: 503 stale_token"
	case stale.status == 503:
		did = "the woken holder saw its lock lost before commit and rolled back: 503 " + stale.code
	case stale.status == 201:
		did = "the woken holder had claimed the fence before the pause; its row lock held order2 back until it committed, then order2 sold on the true stock"
	}
	record(reliabilityRow{"9. holder paused past its lease (" + mode + ")",
		fmt.Sprintf("SIGSTOP of the holder inside its 1 s of work for %.1f s (Redis lock TTL 2 s, ZooKeeper session 2 s); another replica buys 3; SIGCONT", pause.Seconds()),
		did, "until SIGCONT", fmtAudit(a)})
}

// Scenario 10: Redis restarts (persistence off) while a purchase holds its lock: the lock and the
// token counter are gone.
func TestRedisRestartedWhileHeld(t *testing.T) { inRedisModes(t, testRedisRestartedWhileHeld) }

func testRedisRestartedWhileHeld(t *testing.T, mode string) {
	dsn := testenv.MySQLDatabase(t)
	rdb := redisClient(t)
	settings := []string{"REDIS_LOCK_TTL=10s", "LOCK_TIMEOUT=20s", "LOCK_MODE=" + mode}
	ensemble := testenv.ZKEnsemble(t)
	holder := startReplicas(t, 1, dsn, ensemble, append(settings, "WORK_DELAY=3s")...)[0]
	other := startReplicas(t, 1, dsn, ensemble, append(settings, "WORK_DELAY=10ms", "REPLICA_ID=order2")...)[0]
	other.name = "order2"
	sku := "F-REDIS-RESTART-" + mode
	reset(t, other, sku, 10)
	outcomes := map[string]outcome{}
	buy := func(r *replica, key string) outcome {
		st, m := call("POST", r.url+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku), "Idempotency-Key", key)
		code, _ := m["code"].(string)
		return outcome{status: st, code: code, at: time.Now()}
	}
	for i := range 3 { // tokens 1..3 reach the fence
		outcomes[fmt.Sprintf("warm-%d", i)] = buy(other, fmt.Sprintf("warm-%d", i))
	}
	held := make(chan outcome, 1)
	go func() { held <- buy(holder, "held") }()
	waitHeld(t, mode, rdb, other, sku, "order1")
	restartedAt := restartRedis(t, 0)
	for i := range 2 {
		outcomes[fmt.Sprintf("after-%d", i)] = buy(other, fmt.Sprintf("after-%d", i))
	}
	outcomes["held"] = <-held
	a, codes := verdict(t, dsn, sku, outcomes, mode != "redis")
	t.Logf("answers %v; audit %+v", codes, a)
	first := outcomes["after-0"]
	var did string
	switch {
	case a.LostUpdates != 0 || a.Oversold != 0:
		did = "the lock vanished with Redis's data: order2 took it while order1 still held it, both sold on the same stock: **corrupted**"
	case mode == "redis-fenced" && first.status == 201:
		did = "the token counter started again from 0: the fence refused order2's first token, which wrote nothing; order2 raised the counter to the fence and bought with a new token (201)"
	case first.at.Sub(restartedAt) > 2*time.Second:
		did = fmt.Sprintf("order2 waited %.1f s behind order1's fence claim, then sold; nothing lost", first.at.Sub(restartedAt).Seconds())
	default:
		did = "no effect: the lock is not in Redis"
	}
	record(reliabilityRow{"10. Redis restarted while a lock is held (" + mode + ")",
		"Redis (persistence off) restarted while order1 held the lock inside 3 s of work; order2 buys 2", did, "—", fmtAudit(a)})
}

// Scenario 11: Redis down for 10 s under load. The Redis modes sell nothing without their lock.
func TestRedisDownUnderLoad(t *testing.T) { inRedisModes(t, testRedisDownUnderLoad) }

func testRedisDownUnderLoad(t *testing.T, mode string) {
	dsn := testenv.MySQLDatabase(t)
	rs := startReplicas(t, 3, dsn, testenv.ZKEnsemble(t), "REDIS_LOCK_TTL=3s", "WORK_DELAY=20ms", "LOCK_TIMEOUT=2s", "LOCK_MODE="+mode)
	sku := "F-REDIS-DOWN-" + mode
	reset(t, rs[0], sku, 100000)
	b := startBuyers(rs, sku, 6, 0)
	time.Sleep(2 * time.Second)
	stoppedAt := time.Now()
	restartedAt := restartRedis(t, 10*time.Second)
	time.Sleep(4 * time.Second)
	outcomes := b.halt()
	a, codes := verdict(t, dsn, sku, outcomes, mode != "redis")
	soldDuring := 0
	for _, o := range outcomes {
		// A purchase that took its lock before the stop may still finish within LOCK_TIMEOUT.
		if o.status == 201 && o.at.After(stoppedAt.Add(3*time.Second)) && o.at.Before(restartedAt) {
			soldDuring++
		}
	}
	resumed, ok := firstSuccessAfter(outcomes, restartedAt)
	switch {
	case mode != "zk" && soldDuring != 0:
		t.Errorf("%d purchases sold while Redis was down", soldDuring)
	case !ok:
		t.Errorf("no sale after Redis came back")
	}
	t.Logf("answers %v; sold while down %d; audit %+v", codes, soldDuring, a)
	did := fmt.Sprintf("no sale while Redis was down (answers %s); sales resumed %.1f s after it was back", fmtCodes(codes), resumed.Sub(restartedAt).Seconds())
	if mode == "zk" {
		did = fmt.Sprintf("no effect: %d sales while Redis was down (answers %s)", soldDuring, fmtCodes(codes))
	}
	record(reliabilityRow{"11. Redis down for 10 s (" + mode + ")", "Redis stopped for 10 s under load (6 buyers, 3 replicas, LOCK_TIMEOUT 2 s)",
		did, fmt.Sprintf("%.1f s from restart to the first sale", resumed.Sub(restartedAt).Seconds()), fmtAudit(a)})
}
