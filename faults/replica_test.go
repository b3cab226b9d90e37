package faults

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
)

// Scenario 1: kill -9 the replica that holds the SKU lock inside its critical section.
func TestHolderKilled(t *testing.T) {
	const session = 3 * time.Second
	dsn := testenv.MySQLDatabase(t)
	rs := startReplicas(t, 3, dsn, testenv.ZKEnsemble(t), "ZK_SESSION_TIMEOUT=3s", "WORK_DELAY=300ms", "LOCK_TIMEOUT=20s")
	sku := "F-KILL"
	reset(t, rs[1], sku, 100000)
	b := startBuyers(rs, sku, 6, 0)
	time.Sleep(time.Second)
	waitHolder(t, rs[1], sku, "order1", 15*time.Second)
	killedAt := time.Now()
	rs[0].kill9()
	time.Sleep(session + 3*time.Second)
	outcomes := b.halt()

	next, ok := firstSuccessAfter(outcomes, killedAt)
	if !ok {
		t.Fatal("no purchase succeeded after the holder was killed")
	}
	stall := next.Sub(killedAt)
	a, codes := verdict(t, dsn, sku, outcomes, true)
	t.Logf("stall %v, answers %v, audit %+v", stall, codes, a)
	// The dead holder's node goes when its session expires: the stall is the session timeout
	// (plus ZooKeeper's expiry tick), not more.
	if stall > session+1500*time.Millisecond {
		t.Fatalf("sales stalled %v after the holder died; session timeout is %v", stall, session)
	}
	record(reliabilityRow{"1. holder killed", "`kill -9` of the replica holding the lock, mid-transaction, under load (3 replicas, 6 buyers)",
		fmt.Sprintf("its transaction rolled back; its node vanished when its session expired; the other replicas carried on (%d sold)", codes["201"]),
		fmt.Sprintf("%.1f s (session 3 s)", stall.Seconds()), fmtAudit(a)})
}

// Scenario 2: SIGSTOP a holder mid-critical-section for longer than its session, let another
// replica sell, then SIGCONT. How soon the woken holder learns that its session expired depends on
// its server list: with the three peers it reconnects at once and sees the expiry within
// milliseconds; with one server go-zookeeper waits a second before it retries, so the woken
// holder writes first. With the fence (zk) the stock stays exact either way; with the lock alone
// (zk-unfenced) the slow case corrupts it, and the test insists that it does.
func TestHolderPausedPastSession(t *testing.T) {
	for _, c := range []struct {
		mode    string
		servers string
	}{{"zk", "3 servers"}, {"zk", "1 server"}, {"zk-unfenced", "3 servers"}, {"zk-unfenced", "1 server"}} {
		t.Run(c.mode+"/"+c.servers, func(t *testing.T) {
			dsn := testenv.MySQLDatabase(t)
			ensemble := testenv.ZKEnsemble(t)
			settings := []string{"ZK_SESSION_TIMEOUT=2s", "WORK_DELAY=1s", "LOCK_TIMEOUT=30s", "LOCK_MODE=" + c.mode}
			holderServers := ensemble
			if c.servers == "1 server" {
				holderServers = ensemble[:1]
			}
			holder := startReplicas(t, 1, dsn, holderServers, settings...)[0]
			other := startReplicas(t, 1, dsn, ensemble, append(settings, "REPLICA_ID=order2")...)[0]
			sku := "F-PAUSE"
			reset(t, other, sku, 10)

			type answer struct {
				key    string
				status int
				code   string
			}
			answers := make(chan answer, 4)
			buy := func(r *replica, key string) {
				st, m := call("POST", r.url+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku), "Idempotency-Key", key)
				code, _ := m["code"].(string)
				answers <- answer{key, st, code}
			}
			go buy(holder, "stale")
			waitHolder(t, other, sku, "order1", 10*time.Second)
			time.Sleep(300 * time.Millisecond) // past its read of the stock, inside its 1 s of work
			holder.signal(syscall.SIGSTOP)
			pausedAt := time.Now()
			time.Sleep(3500 * time.Millisecond) // past the 2 s session: the server expires it
			go func() {
				for i := 0; i < 3; i++ {
					buy(other, fmt.Sprintf("fresh-%d", i))
				}
			}()
			outcomes := map[string]outcome{}
			var stale answer
			collect := func() {
				select {
				case a := <-answers:
					outcomes[a.key] = outcome{status: a.status, code: a.code}
					if a.key == "stale" {
						stale = a
					}
				case <-time.After(60 * time.Second):
					t.Fatal("purchases did not finish")
				}
			}
			if c.mode == "zk-unfenced" {
				// Without a fence nothing holds order2 back: let it finish its sales first, so
				// that the woken holder writes last.
				for len(outcomes) < 3 {
					collect()
				}
			} else {
				time.Sleep(2 * time.Second) // order2 now waits behind the paused holder's row lock
			}
			holder.signal(syscall.SIGCONT)
			pause := time.Since(pausedAt)
			for len(outcomes) < 4 {
				collect()
			}
			a, codes := verdict(t, dsn, sku, outcomes, c.mode == "zk")
			t.Logf("stale holder answered %d %s; answers %v; audit %+v", stale.status, stale.code, codes, a)
			corrupted := a.LostUpdates != 0 || a.Oversold != 0
			var did string
			switch {
			case stale.status == 503:
				did = fmt.Sprintf("the woken holder learnt of the expiry before commit and rolled back: 503 %s", stale.code)
			case c.mode == "zk":
				did = "the woken holder had claimed the fence before the pause; that row lock held the new holder back until it committed (201), then the new holder sold on the true stock"
			case corrupted:
				did = "the new holder sold during the pause; the woken holder wrote the stock it had read before the pause (201): **corrupted**, as this mode must show"
			default:
				did = fmt.Sprintf("the woken holder answered %d", stale.status)
			}
			switch {
			case c.mode == "zk" && stale.status != 201 && !(stale.status == 503 && (stale.code == "lock_lost" || stale.code == "stale_token")):
				t.Fatalf("stale holder answered %d %s", stale.status, stale.code)
			case c.mode == "zk-unfenced" && c.servers == "1 server" && !corrupted:
				// The danger must stay visible: the lock alone does not protect the stock.
				t.Fatalf("zk-unfenced survived a paused holder without corruption (%+v): the demonstration is broken", a)
			}
			record(reliabilityRow{fmt.Sprintf("2. holder paused past its session: %s, holder knows %s", c.mode, c.servers),
				fmt.Sprintf("SIGSTOP of the holder inside its 1 s of work for %.1f s (session 2 s); another replica buys 3; SIGCONT", pause.Seconds()),
				did, "until SIGCONT", fmtAudit(a)})
		})
	}
}

// Scenario 6: the holding replica is cut off from ZooKeeper. Lost fires after two thirds of the
// session, the purchase rolls back with lock_lost, and another replica takes over.
func TestHolderCutOffFromZooKeeper(t *testing.T) {
	ensemble := testenv.ZKEnsemble(t)
	proxy := tcpproxy.New(t, ensemble[0])
	dsn := testenv.MySQLDatabase(t)
	const settings = "ZK_SESSION_TIMEOUT=3s"
	cut := startReplicas(t, 1, dsn, []string{proxy.Addr()}, settings, "WORK_DELAY=10s", "LOCK_TIMEOUT=20s")[0]
	other := startReplicas(t, 1, dsn, ensemble, settings, "WORK_DELAY=10ms", "LOCK_TIMEOUT=20s", "REPLICA_ID=order2")[0]
	other.name = "order2"
	sku := "F-CUT"
	reset(t, other, sku, 10)

	got := make(chan outcome, 1)
	go func() {
		st, m := call("POST", cut.url+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku), "Idempotency-Key", "cut-1")
		code, _ := m["code"].(string)
		got <- outcome{status: st, code: code, at: time.Now()}
	}()
	waitHolder(t, other, sku, "order1", 10*time.Second)
	cutAt := time.Now()
	proxy.Cut()
	var o outcome
	select {
	case o = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("the cut-off holder did not answer")
	}
	lostAfter := o.at.Sub(cutAt)
	if o.status != 503 || o.code != "lock_lost" {
		t.Fatalf("cut-off holder answered %d %s, want 503 lock_lost", o.status, o.code)
	}
	if lostAfter > 3*time.Second {
		t.Fatalf("lock_lost came %v after the cut; two thirds of the session is 2 s", lostAfter)
	}
	start := time.Now()
	st, _ := call("POST", other.url+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku), "Idempotency-Key", "other-1")
	if st != 201 {
		t.Fatalf("the other replica could not take over: %d", st)
	}
	takeover := time.Since(cutAt)
	a, _ := verdict(t, dsn, sku, map[string]outcome{"cut-1": o, "other-1": {status: st}}, true)
	if a.Orders != 1 || a.Stock != 9 {
		t.Fatalf("audit %+v: want only the other replica's order", a)
	}
	t.Logf("lock_lost %v after the cut; other replica sold %v after the cut (its purchase took %v)", lostAfter, takeover, time.Since(start))
	record(reliabilityRow{"6. holder cut off from ZooKeeper", "TCP proxy between the holding replica and ZooKeeper cut mid-transaction",
		fmt.Sprintf("Lost fired after %.1f s, the purchase rolled back and answered 503 lock_lost; another replica sold once the session expired", lostAfter.Seconds()),
		fmt.Sprintf("%.1f s until the other replica sold (session 3 s)", takeover.Seconds()), fmtAudit(a)})
}
