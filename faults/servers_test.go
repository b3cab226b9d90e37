package faults

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
)

func ensembleDirs(t *testing.T) []string {
	t.Helper()
	dirs := strings.Split(os.Getenv("ZK_ENSEMBLE_DIRS"), ",")
	if len(dirs) != 3 {
		t.Fatalf("ZK_ENSEMBLE_DIRS %q: want three peers", os.Getenv("ZK_ENSEMBLE_DIRS"))
	}
	return dirs
}

func waitServing(t *testing.T, addrs []string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, a := range addrs {
		testenv.WaitZKMode(t, a, time.Until(deadline), "leader", "follower", "standalone")
	}
}

func pidOf(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(dir + "/pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// longestGap is the longest time without a 201 between from and to.
func longestGap(outcomes map[string]outcome, from, to time.Time) time.Duration {
	times := []time.Time{from}
	for _, o := range outcomes {
		if o.status == 201 && o.at.After(from) && o.at.Before(to) {
			times = append(times, o.at)
		}
	}
	times = append(times, to)
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	var gap time.Duration
	for i := 1; i < len(times); i++ {
		gap = max(gap, times[i].Sub(times[i-1]))
	}
	return gap
}

// Scenario 3: kill -9 the ZooKeeper leader under load.
func TestZooKeeperLeaderKilled(t *testing.T) { inEachMode(t, testZooKeeperLeaderKilled) }

func testZooKeeperLeaderKilled(t *testing.T, mode string) {
	ensemble, dirs := testenv.ZKEnsemble(t), ensembleDirs(t)
	waitServing(t, ensemble, 60*time.Second)
	leader := testenv.ZKLeader(ensemble)
	if leader < 0 {
		t.Fatal("no leader in the ensemble")
	}
	dsn := testenv.MySQLDatabase(t)
	rs := startReplicas(t, 3, dsn, ensemble, "ZK_SESSION_TIMEOUT=6s", "WORK_DELAY=20ms", "LOCK_TIMEOUT=20s", "LOCK_MODE="+mode)
	sku := "F-LEADER"
	reset(t, rs[0], sku, 100000)
	b := startBuyers(rs, sku, 6, 0)
	time.Sleep(2 * time.Second)
	killedAt := time.Now()
	if err := syscall.Kill(pidOf(t, dirs[leader]), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	end := time.Now()
	outcomes := b.halt()
	testenv.ServersScript(t, "start-server", dirs[leader])
	waitServing(t, ensemble, 60*time.Second)

	if _, ok := firstSuccessAfter(outcomes, killedAt.Add(500*time.Millisecond)); !ok {
		t.Fatal("purchases did not resume after the leader died")
	}
	stall := longestGap(outcomes, killedAt, end)
	a, codes := verdict(t, dsn, sku, outcomes, true)
	checkTokensGrow(t, dsn, sku, mode)
	t.Logf("leader peer %d killed; longest pause %v; answers %v; audit %+v", leader+1, stall, codes, a)
	record(reliabilityRow{"3. ZooKeeper leader killed (" + mode + ")", fmt.Sprintf("`kill -9` of the leader of the 3-peer ensemble under load (6 buyers, 3 replicas)"),
		fmt.Sprintf("purchases paused during the election and resumed; no two holders (fencing tokens grow with every order); answers %s", fmtCodes(codes)),
		fmt.Sprintf("%.1f s longest pause", stall.Seconds()), fmtAudit(a)})
}

// Scenario 4: the whole ensemble down for 20 s under load.
func TestZooKeeperDownUnderLoad(t *testing.T) { inEachMode(t, testZooKeeperDownUnderLoad) }

func testZooKeeperDownUnderLoad(t *testing.T, mode string) {
	ensemble, dirs := testenv.ZKEnsemble(t), ensembleDirs(t)
	waitServing(t, ensemble, 60*time.Second)
	dsn := testenv.MySQLDatabase(t)
	const lockTimeout = 2 * time.Second
	rs := startReplicas(t, 3, dsn, ensemble, "ZK_SESSION_TIMEOUT=6s", "WORK_DELAY=20ms", "LOCK_TIMEOUT=2s", "LOCK_MODE="+mode)
	sku := "F-ZKDOWN"
	reset(t, rs[0], sku, 100000)
	b := startBuyers(rs, sku, 6, 0)
	time.Sleep(2 * time.Second)
	downAt := time.Now()
	for _, d := range dirs {
		testenv.ServersScript(t, "stop-server", d)
	}
	time.Sleep(lockTimeout + time.Second)
	st, _ := call("GET", rs[1].url+"/readyz", "")
	if st != 503 {
		t.Errorf("readyz answered %d while ZooKeeper was down", st)
	}
	duringFrom := time.Now()
	time.Sleep(20*time.Second - (lockTimeout + time.Second))
	upAt := time.Now()
	during := b.snapshot()
	for _, d := range dirs {
		testenv.ServersScript(t, "start-server", d)
	}
	waitServing(t, ensemble, 60*time.Second)
	back := b.waitSale(t, upAt, 30*time.Second, "after ZooKeeper came back, without restarting the replicas")
	time.Sleep(2 * time.Second)
	outcomes := b.halt()
	for _, r := range rs {
		r.waitReady(30 * time.Second)
	}

	var failedFast, sold int
	var slowest time.Duration
	for _, o := range during {
		// Judged by when the request was sent: a purchase committed just before the outage may
		// be answered a little later, after its release gave up on the unreachable ZooKeeper.
		if started := o.at.Add(-o.took); started.After(duringFrom) && started.Before(upAt) {
			if o.status == 201 {
				sold++
			}
			if o.status == 503 {
				failedFast++
				slowest = max(slowest, o.took)
			}
		}
	}
	if slowest > lockTimeout+2*time.Second {
		t.Errorf("a 503 took %v with LOCK_TIMEOUT %v", slowest, lockTimeout)
	}
	if sold != 0 {
		t.Errorf("%d purchases sent while ZooKeeper was down succeeded", sold)
	}
	if failedFast == 0 {
		t.Error("no purchase was refused while ZooKeeper was down")
	}
	a, codes := verdict(t, dsn, sku, outcomes, true)
	t.Logf("down %v; %d clean 503s while down; first sale %v after restart; answers %v; audit %+v",
		upAt.Sub(downAt).Round(time.Second), failedFast, back.Sub(upAt), codes, a)
	record(reliabilityRow{"4. ZooKeeper fully down (" + mode + ")", fmt.Sprintf("all 3 peers stopped for %.0f s under load (LOCK_TIMEOUT 2 s)", upAt.Sub(downAt).Seconds()),
		fmt.Sprintf("%d purchases answered 503 lock_unavailable, the slowest after %.1f s; none sold; /readyz 503; recovered without restarting replicas", failedFast, slowest.Seconds()),
		fmt.Sprintf("%.1f s from restart to the first sale", back.Sub(upAt).Seconds()), fmtAudit(a)})
}

// Scenario 5: MariaDB restarted under load.
func TestMySQLRestartUnderLoad(t *testing.T) { inEachMode(t, testMySQLRestartUnderLoad) }

func testMySQLRestartUnderLoad(t *testing.T, mode string) {
	myDir := os.Getenv("MYSQL_DIR")
	dsn := testenv.MySQLDatabase(t)
	rs := startReplicas(t, 3, dsn, testenv.ZKEnsemble(t), "ZK_SESSION_TIMEOUT=6s", "WORK_DELAY=20ms", "LOCK_TIMEOUT=5s", "LOCK_MODE="+mode)
	sku := "F-DBDOWN"
	reset(t, rs[0], sku, 100000)
	b := startBuyers(rs, sku, 6, 0)
	time.Sleep(2 * time.Second)
	downAt := time.Now()
	testenv.ServersScript(t, "stop-server", myDir)
	time.Sleep(5 * time.Second)
	if st, _ := call("GET", rs[0].url+"/readyz", ""); st != 503 {
		t.Errorf("readyz answered %d while the database was down", st)
	}
	upAt := time.Now()
	testenv.ServersScript(t, "start-server", myDir)
	back := b.waitSale(t, upAt, 60*time.Second, "after the database came back")
	time.Sleep(2 * time.Second)
	outcomes := b.halt()
	a, codes := verdict(t, dsn, sku, outcomes, true)
	if holder := lockHolder(rs[0], sku); holder != "" {
		t.Errorf("lock still held by %s after the load stopped", holder)
	}
	t.Logf("down %v; back after %v; answers %v; audit %+v", upAt.Sub(downAt).Round(100*time.Millisecond), back.Sub(upAt), codes, a)
	record(reliabilityRow{"5. MariaDB restarted (" + mode + ")", fmt.Sprintf("mariadbd stopped for %.0f s under load, then started again", upAt.Sub(downAt).Seconds()),
		fmt.Sprintf("clean 503s while down (%s), no partial order, locks released, recovered without restarting replicas", fmtCodes(codes)),
		fmt.Sprintf("%.1f s from restart to the first sale", back.Sub(upAt).Seconds()), fmtAudit(a)})
}

func fmtCodes(codes map[string]int) string {
	var keys []string
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, codes[k])
	}
	return strings.Join(parts, ", ")
}
