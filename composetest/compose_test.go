package composetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/doctest"
	"github.com/zkstock/zkstock/loadtest"
)

// The user's docker-compose.yml as it is: one ZooKeeper, MySQL (MariaDB here), Redis and three
// replicas, broken in the ways that hurt.
func TestCompose(t *testing.T) {
	s := newStack(t, "docker-compose.yml")
	t.Run("curl", func(t *testing.T) { testCurl(t) })
	t.Run("loadtest-profile", func(t *testing.T) { testLoadtestProfile(t, s) })
	t.Run("replica-killed", func(t *testing.T) { testReplicaKilled(t, s) })
	t.Run("holder-paused", func(t *testing.T) { testHolderPaused(t, s) })
	t.Run("cut-off-from-zookeeper", func(t *testing.T) { testCutOff(t, s) })
	t.Run("redis-modes", func(t *testing.T) { testRedisModes(t) })
	t.Run("credentials", func(t *testing.T) { testCredentials(t, s) })
}

// What docs/compose.md's stack does by hand.
func testCurl(t *testing.T) {
	for _, r := range replicas {
		if st, m := call(t, http.MethodGet, r+"/readyz", ""); st != http.StatusOK {
			t.Fatalf("%s/readyz: %d %v", r, st, m)
		}
	}
	reset(t, "CURL-1", 10)
	setMode(t, "zk", replicas...)
	for i, r := range replicas {
		st, m := call(t, http.MethodPost, r+"/v1/orders", `{"sku":"CURL-1","qty":2}`)
		if st != http.StatusCreated || m["replica"] != fmt.Sprintf("order%d", i+1) || m["remaining"] != float64(10-2*(i+1)) {
			t.Fatalf("purchase on %s: %d %v", r, st, m)
		}
	}
	if a := auditOf(t, replicas[2], "CURL-1"); a != (audit{Stock: 4, Orders: 3, UnitsSold: 6}) {
		t.Fatalf("audit %+v", a)
	}
	resp, err := httpClient.Get(replicas[0] + "/?sku=CURL-1")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The page is served with its first frame in it: the audit's figures of the moment.
	if resp.StatusCode != 200 || !strings.Contains(string(page), `"units_sold":6`) {
		t.Fatalf("the live page: %d %.200s", resp.StatusCode, page)
	}
	record(t, "`/readyz` 200 on 8081–8083; one purchase on each: 201, stock 10 → 4, audit exact; the live page served at /")
}

// `docker-compose run --rm loadtest`, as the README says, several times in a row (a newcomer runs
// it again): every run shows none overselling and zk's exact row, zk 1000 100 900 0 (issue 47:
// runs drew 39-224 sku_busy where the README shows 0), and writes the report in ./out.
func testLoadtestProfile(t *testing.T, s *stack) {
	const runs = 5
	root := repoRoot(t)
	report := filepath.Join(root, "out", "demo-report.json")
	noneRow := regexp.MustCompile(`(?m)^\s*none\s+1000\s+\d+\s+\d+\s+0\s+100\s+\d+\s+(\d+)\s+(\d+)\s`)
	zkRow := regexp.MustCompile(`(?m)^\s*zk\s+1000\s+(\d+)\s+(\d+)\s+(\d+)\s+100\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s`)
	var zkRows, failed []string
	var oversold []string
	for run := 1; run <= runs; run++ {
		_ = os.Remove(report)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		out, err := s.compose(ctx, "--profile", "loadtest", "run", "--rm", "loadtest")
		cancel()
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, out)
		}
		none, zk := noneRow.FindStringSubmatch(out), zkRow.FindStringSubmatch(out)
		if none == nil || zk == nil {
			t.Fatalf("run %d: the table has no none or zk row:\n%s", run, out)
		}
		if none[1] == "0" && none[2] == "0" {
			t.Errorf("run %d: none did not oversell:\n%s", run, out)
		}
		oversold = append(oversold, none[1])
		// accepted, sold out, errors; then final, oversold, lost updates, undersold
		zkRows = append(zkRows, strings.Join(zk[1:4], " "))
		if strings.Join(zk[1:], " ") != "100 900 0 0 0 0 0" {
			failed = append(failed, fmt.Sprintf("run %d: zk 1000 %s (accepted, sold out, errors, final, oversold, lost, undersold)\n%s", run, strings.Join(zk[1:], " "), out))
		}
		raw, err := os.ReadFile(report)
		if err != nil {
			t.Fatalf("run %d: the loadtest service did not write ./out/demo-report.json: %v", run, err)
		}
		var rep loadtest.Report
		if err := json.Unmarshal(raw, &rep); err != nil || len(rep.Rows) != 2 {
			t.Fatalf("run %d: report: %v, %d rows", run, err, len(rep.Rows))
		}
		if _, err := os.Stat(filepath.Join(root, "out", "demo-report.html")); err != nil {
			t.Fatal(err)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d runs in a row missed the README's zk 1000 100 900 0:\n%s", len(failed), runs, strings.Join(failed, "\n"))
	}
	record(t, "`docker-compose run --rm loadtest`, %d runs in a row: none oversold %s; zk accepted, sold out, errors: %s (exact each time); report in ./out",
		runs, strings.Join(oversold, ", "), strings.Join(zkRows, "; "))
}

// A replica killed mid-load: the load goes on through the others, the dead replica's lock nodes
// vanish with its session, and the stock stays exact.
func testReplicaKilled(t *testing.T, s *stack) {
	const sku, stock = "KILL-1", 600
	reset(t, sku, stock) // the load resets it too; this one lets the audit below answer at once
	l := startLoad(t, loadtest.Config{SKU: sku, Stock: stock, Requests: 1500, Concurrency: 30, Modes: []string{"zk"}})
	waitFor(t, 30*time.Second, "100 sold", func() bool { return auditOf(t, replicas[0], sku).UnitsSold >= 100 })
	owned := func() (nodes []string) {
		for _, e := range queueOf(t, replicas[0], sku) {
			if e.Owner == "order2" {
				nodes = append(nodes, e.Node)
			}
		}
		return nodes
	}
	waitFor(t, 10*time.Second, "a node of order2 in the queue", func() bool { return len(owned()) > 0 })
	docker(t, "kill", s.container(t, "order2"))
	// What the dead replica left: nothing deletes these nodes but the end of its session.
	nodes := owned()
	if len(nodes) == 0 {
		t.Fatal("order2 left no node in the queue; kill it while it waits")
	}
	gone := waitFor(t, 20*time.Second, "order2's lock nodes gone", func() bool {
		for _, e := range queueOf(t, replicas[0], sku) {
			for _, n := range nodes {
				if e.Node == n {
					return false
				}
			}
		}
		return true
	})
	row := l.wait(t)[0]
	exact(t, row, stock)
	if row.Failovers == 0 || row.Accepted != stock {
		t.Fatalf("want purchases failed over from the killed replica and every sale known to its client: %s", summary(row))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := s.compose(ctx, "up", "-d", "--no-build", "order2"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s.waitHealthy(t, ctx, "order2")
	record(t, "`docker kill` of order2 after 100 sales: the %d lock nodes it left gone %.1f s later (session 4 s); %d purchases failed over to the next replica; %d of %d sold, oversold 0, lost updates 0",
		len(nodes), gone.Seconds(), row.Failovers, row.Orders, stock)
}

// The lock holder's container frozen (docker pause) past its session, then thawed: the others
// sell meanwhile, and whatever the woken holder tries, the stock stays exact.
func testHolderPaused(t *testing.T, s *stack) {
	const sku, stock = "PAUSE-1", 400
	id := s.container(t, "order1")
	lostBefore := ordersCounter(t, replicas[0], "lock_lost")
	staleBefore := ordersCounter(t, replicas[0], "stale_token")
	unavailableBefore := ordersCounter(t, replicas[0], "lock_unavailable")
	reset(t, sku, stock)
	l := startLoad(t, loadtest.Config{SKU: sku, Stock: stock, Requests: 1200, Concurrency: 30, Modes: []string{"zk"}})
	waitFor(t, 30*time.Second, "50 sold", func() bool { return auditOf(t, replicas[1], sku).UnitsSold >= 50 })
	// Freeze order1, then look: if it did not hold the lock at that moment, thaw it and try again.
	var held string
	var heldToken int64
	for try := 0; try < 100 && held == ""; try++ {
		docker(t, "pause", id)
		for _, e := range queueOf(t, replicas[1], sku) {
			if e.Holder && e.Owner == "order1" {
				held, heldToken = e.Node, e.Token
			}
		}
		if held == "" {
			docker(t, "unpause", id)
			time.Sleep(50 * time.Millisecond)
		}
	}
	if held == "" {
		t.Fatal("order1 never held the lock when it was paused")
	}
	pausedAt := time.Now()
	soldAtPause := auditOf(t, replicas[1], sku).UnitsSold
	// ZooKeeper expires the frozen replica's session and deletes its node; the next one holds.
	expired := waitFor(t, 20*time.Second, "the paused holder's node gone", func() bool {
		for _, e := range queueOf(t, replicas[1], sku) {
			if e.Node == held {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second)
	soldWhilePaused := auditOf(t, replicas[1], sku).UnitsSold - soldAtPause
	docker(t, "unpause", id)
	paused := time.Since(pausedAt)
	row := l.wait(t)[0]
	exact(t, row, stock)
	lost := ordersCounter(t, replicas[0], "lock_lost") - lostBefore
	stale := ordersCounter(t, replicas[0], "stale_token") - staleBefore
	unavailable := ordersCounter(t, replicas[0], "lock_unavailable") - unavailableBefore
	// Where the pause fell decides what the woken holder does, and each way keeps the stock exact:
	//   - after its commit, during its release: its sale under its token stands, made before the
	//     pause; the others sell once its session has expired;
	//   - inside its transaction, after it claimed the fence: its open transaction holds the product
	//     row, so the next holder waits (nothing sold meanwhile); woken, it sees its lease lost at
	//     its last look before commit and rolls back (503 lock_lost), or, past that look, commits
	//     before the next holder's claim;
	//   - before its claim: the next holder claims the fence first and the woken write is refused
	//     (503 stale_token), or it sees its lease lost first (503 lock_lost);
	//   - before it learnt that it held the lock (its node had become the head, the watch had not
	//     fired yet): woken, its session is gone, and its lock attempt fails (503 lock_unavailable).
	order, committed := orderWithToken(t, replicas[1], sku, heldToken)
	var what string
	switch {
	case committed && soldWhilePaused > 0:
		what = fmt.Sprintf("it had committed its sale (order %v, token %d) before the pause, during its release", order["id"], heldToken)
	case committed:
		what = fmt.Sprintf("its open transaction held the product row, so nothing was sold meanwhile; woken, it committed its sale (order %v, token %d) and the next holder sold after it", order["id"], heldToken)
	case stale > 0:
		what = fmt.Sprintf("the fence refused its write (503 stale_token ×%v); nothing sold under token %d", stale, heldToken)
	case lost > 0:
		what = fmt.Sprintf("it saw its lease lost before commit and rolled back (503 lock_lost ×%v); nothing sold under token %d", lost, heldToken)
	case unavailable > 0:
		what = fmt.Sprintf("its node had become the head before it was told; woken, its session was gone and its lock attempts failed (503 lock_unavailable ×%v); nothing sold under token %d", unavailable, heldToken)
	default:
		t.Fatalf("the woken holder neither sold under token %d nor was refused (lock_lost %v, stale_token %v, lock_unavailable %v): %s", heldToken, lost, stale, unavailable, summary(row))
	}
	record(t, "`docker pause` of order1 while it held the lock, for %.1f s (session 4 s): its node gone after %.1f s; the others sold %d meanwhile; %s; %d of %d sold, oversold 0, lost updates 0",
		paused.Seconds(), expired.Seconds(), soldWhilePaused, what, row.Orders, stock)
}

// A replica cut off from ZooKeeper alone (docker network disconnect from the zookeeper network):
// it turns unready and sells nothing; reconnected, it is ready and sells again.
func testCutOff(t *testing.T, s *stack) {
	const sku = "CUT-1"
	reset(t, sku, 50)
	setMode(t, "zk", replicas...)
	network := s.project + "_zookeeper"
	id := s.container(t, "order3")
	docker(t, "network", "disconnect", network, id)
	unready := waitFor(t, 20*time.Second, "order3 unready", func() bool {
		st, _ := call(t, http.MethodGet, replicas[2]+"/readyz", "")
		return st == http.StatusServiceUnavailable
	})
	answers := make(chan string, 5)
	for i := 0; i < 5; i++ {
		go func() {
			st, m := call(t, http.MethodPost, replicas[2]+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku))
			code, _ := m["code"].(string)
			answers <- fmt.Sprintf("%d %s", st, code)
		}()
	}
	codes := map[string]bool{}
	for i := 0; i < 5; i++ {
		a := <-answers
		if !strings.HasPrefix(a, "503 ") {
			t.Fatalf("order3, cut off from ZooKeeper, answered %s", a)
		}
		codes[a] = true
	}
	for i := 0; i < 5; i++ {
		if st, m := call(t, http.MethodPost, replicas[0]+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku)); st != http.StatusCreated {
			t.Fatalf("order1 while order3 is cut off: %d %v", st, m)
		}
	}
	if a := auditOf(t, replicas[0], sku); a != (audit{Stock: 45, Orders: 5, UnitsSold: 5}) {
		t.Fatalf("order3 sold while cut off: %+v", a)
	}
	docker(t, "network", "connect", network, id)
	ready := waitFor(t, 60*time.Second, "order3 ready again", func() bool {
		st, _ := call(t, http.MethodGet, replicas[2]+"/readyz", "")
		return st == http.StatusOK
	})
	if st, m := call(t, http.MethodPost, replicas[2]+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku)); st != http.StatusCreated {
		t.Fatalf("order3 after reconnecting: %d %v", st, m)
	}
	if a := auditOf(t, replicas[2], sku); a != (audit{Stock: 44, Orders: 6, UnitsSold: 6}) {
		t.Fatalf("audit %+v", a)
	}
	record(t, "`docker network disconnect` of order3 from the zookeeper network: unready after %.1f s; its 5 purchases answered %s, none sold; order1 sold 5; reconnected, ready after %.1f s and selling",
		unready.Seconds(), strings.Join(slices.Sorted(maps.Keys(codes)), " or "), ready.Seconds())
}

// The Redis lock modes through the same stack.
func testRedisModes(t *testing.T) {
	l := startLoad(t, loadtest.Config{SKU: "REDIS-1", Stock: 100, Requests: 600, Concurrency: 30, Modes: []string{"redis", "redis-fenced"}})
	var parts []string
	for _, row := range l.wait(t) {
		exact(t, row, 100)
		parts = append(parts, fmt.Sprintf("%s: 100 of 100 sold, %.0f req/s", row.Mode, row.Throughput))
	}
	record(t, "loadtest -modes redis,redis-fenced (%d purchases, stock 100): %s; oversold 0, lost updates 0", 600, strings.Join(parts, "; "))
}

// zkServers are the ensemble's servers by compose service, on their published client ports.
var zkServers = []string{"zookeeper=127.0.0.1:2181", "zookeeper2=127.0.0.1:2182", "zookeeper3=127.0.0.1:2183"}

// leader asks zkstat which of the servers leads ("" when none does).
func leader(t testing.TB, zkstat string, servers ...string) string {
	t.Helper()
	out, err := exec.Command(zkstat, append([]string{"-leader", "-timeout", "500ms"}, servers...)...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// docker-compose.ensemble.yml: three ZooKeeper servers. The leader's container is killed under
// load; the replicas' sessions move to the others, purchases go on, and the stock stays exact.
func TestEnsembleLeaderKilled(t *testing.T) {
	zkstat := filepath.Join(t.TempDir(), "zkstat")
	if out, err := exec.Command("go", "build", "-o", zkstat, "../cmd/zkstat").CombinedOutput(); err != nil {
		t.Fatalf("build zkstat: %v\n%s", err, out)
	}
	s := newStack(t, "docker-compose.yml", "docker-compose.ensemble.yml")
	var old string
	waitFor(t, 30*time.Second, "a leader", func() bool { old = leader(t, zkstat, zkServers...); return old != "" })
	setMode(t, "zk", replicas...)
	const sku, stock = "ENSEMBLE-1", 600
	reset(t, sku, stock)
	l := startLoad(t, loadtest.Config{SKU: sku, Stock: stock, Requests: 1500, Concurrency: 30, Modes: []string{"zk"}})
	waitFor(t, 30*time.Second, "100 sold", func() bool { return auditOf(t, replicas[0], sku).UnitsSold >= 100 })
	docker(t, "kill", s.container(t, old))
	killed := time.Now()
	var rest []string
	for _, srv := range zkServers {
		if !strings.HasPrefix(srv, old+"=") {
			rest = append(rest, srv)
		}
	}
	var elected string
	election := waitFor(t, 30*time.Second, "a new leader", func() bool { elected = leader(t, zkstat, rest...); return elected != "" })
	row := l.wait(t)[0]
	exact(t, row, stock)
	gap, gapAt := longestGap(row)
	// Issue 47's goals: sales resume within 2 s of the new leader, and outside the election (from
	// the kill to 2 s after the new leader; the kill's time is taken once docker kill returns, so
	// the window opens 200 ms before it) under 1% of the answers are sku_busy. Times are on the
	// load's clock (row.Started); the new leader is seen within one poll (200 ms) of its election.
	killedAt := killed.Sub(row.Started)
	led := killedAt + election
	resumed := time.Duration(-1)
	for _, sale := range row.Sales {
		if at := time.Duration(sale.AtMillis * float64(time.Millisecond)); at >= led {
			resumed = at - led
			break
		}
	}
	soldOutBefore := len(row.Sales) > 0 && time.Duration(row.Sales[len(row.Sales)-1].AtMillis*float64(time.Millisecond)) < killedAt
	switch {
	case resumed > 2*time.Second:
		t.Errorf("the first sale after the new leader came %.2f s after it, want within 2 s: %s", resumed.Seconds(), summary(row))
	case resumed < 0 && !soldOutBefore:
		t.Errorf("no sale after the new leader, and the stock was not sold out before the kill: %s", summary(row))
	}
	busyOutside := 0
	for _, e := range row.ErrorAnswers {
		at := time.Duration(e.AtMillis * float64(time.Millisecond))
		if e.Code == "sku_busy" && (at < killedAt-200*time.Millisecond || at > led+2*time.Second) {
			busyOutside++
		}
	}
	if busyOutside*100 >= row.Requests {
		t.Errorf("%d of %d answers were sku_busy outside the election, want under 1%%: %s", busyOutside, row.Requests, summary(row))
	}
	resumedText := "none after it: sold out during the election"
	if resumed >= 0 {
		resumedText = fmt.Sprintf("%.2f s after it", resumed.Seconds())
	}
	record(t, "`docker kill` of the leader (%s) after 100 sales: %s led %.1f s later; the first sale after the new leader %s; the longest pause between two sales was %.2f s (from %.1f s into the load; the kill at %.1f s); %d of %d sold, errors %v (%d sku_busy outside the election), oversold 0, lost updates 0",
		old, elected, election.Seconds(), resumedText, gap.Seconds(), gapAt.Seconds(), killedAt.Seconds(), row.Orders, stock, row.ErrorCodes, busyOutside)
}

// docs/tutorial/08-failover-in-docker.md, run as written.
func TestDockerTutorial(t *testing.T) {
	runDockerSteps(t, "docs/tutorial/08-failover-in-docker.md", "docker-compose.yml", "docker-compose.ensemble.yml")
}

// The README's Docker commands (make compose-up, compose-loadtest, compose-down; docker compose
// up, run --rm loadtest, down), run as written.
func TestREADMEDocker(t *testing.T) {
	runDockerSteps(t, "README.md", "docker-compose.yml")
}

// docs/compose.md's Docker commands (the Galera override's up, a purchase, the cluster's size,
// down), run as written.
func TestComposePageDocker(t *testing.T) {
	runDockerSteps(t, "docs/compose.md", "docker-compose.yml", "docker-compose.galera.yml")
}

// runDockerSteps runs a page's steps that need Docker, as written. Their docker-compose and
// docker compose commands go through scripts/compose/shim, which adds the local images' override
// and nothing else; userFiles are the compose files the page uses, for the final clean-up.
func runDockerSteps(t *testing.T, path string, userFiles ...string) {
	root := repoRoot(t)
	page, err := doctest.Parse(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	page = page.Only("docker")
	if len(page.Steps) == 0 {
		t.Fatalf("%s has no steps that need docker", path)
	}
	project := "zkstocktest" + randHex(t, 4)
	realCompose, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Fatal(err)
	}
	realDocker, err := exec.LookPath("docker")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"PATH=" + filepath.Join(root, "scripts/compose/shim") + string(os.PathListSeparator) + os.Getenv("PATH"),
		"REAL_DOCKER_COMPOSE=" + realCompose,
		"REAL_DOCKER=" + realDocker,
		"COMPOSE_PROJECT_NAME=" + project,
	}
	t.Cleanup(func() {
		s := &stack{root: root, project: project, files: append(append(append([]string{}, userFiles...), "scripts/compose/local.yml"), localOverrides(userFiles)...)}
		if out, err := s.compose(context.Background(), "down", "-v", "--remove-orphans", "--timeout", "5"); err != nil {
			t.Errorf("down: %v\n%s", err, out)
		}
	})
	start := time.Now()
	// 6 minutes a step: make compose-up builds the order image and waits for the stack in one step
	doctest.Shell{Dir: root, Env: env, Timeout: 6 * time.Minute}.RunPage(t, page)
	record(t, "%s: its %d Docker steps run as written in %.0f s", path, len(page.Steps), time.Since(start).Seconds())
}
