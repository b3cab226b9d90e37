// Package faults breaks things on purpose: orderd processes are killed, paused and cut off,
// ZooKeeper peers and MariaDB are stopped, all under load, and every scenario ends with the audit.
// It runs under `make test-faults` (ZKSTOCK_FAULTS=1); `make test` skips it.
package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

var orderdBin string

// orderdLiesBin is orderd built with the zkstock_lies tag, for the nemesis's planted lies.
var orderdLiesBin string

func TestMain(m *testing.M) {
	if os.Getenv("ZKSTOCK_FAULTS") != "1" {
		fmt.Fprintln(os.Stderr, "skipping fault scenarios: run `make test-faults`")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "zkstock-faults")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Getenv("NEMESIS") == "1" && os.Getenv("ZKSTOCK_SERVERS_DIR") != "" {
		// The nemesis's first ensemble starts beside the builds; under servers.sh run, whose
		// exit stops it should the binary exit before its end.
		nemesisEnsembles.prestart()
	}
	orderdBin = filepath.Join(dir, "orderd")
	// Build before checking the servers so that a broken build fails loudly either way.
	if out, err := exec.Command("go", "build", "-o", orderdBin, "../cmd/orderd").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build orderd: %v\n%s", err, out)
		os.Exit(1)
	}
	if os.Getenv("NEMESIS") == "1" && strings.Contains(os.Getenv("NEMESIS_MODE"), "+") {
		// The nemesis's planted lies: a build of their own, which no other test runs.
		orderdLiesBin = filepath.Join(dir, "orderd-lies")
		if out, err := exec.Command("go", "build", "-tags", "zkstock_lies", "-o", orderdLiesBin, "../cmd/orderd").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build orderd with planted lies: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	if os.Getenv("NEMESIS") == "1" {
		// The nemesis starts ensembles of its own (make nemesis: servers.sh run --no-ensemble).
		testenv.Require("MYSQL_DSN", "MYSQL_DIR", "REDIS_ADDR", "REDIS_DIR")
	} else {
		testenv.Require("ZK_SERVERS", "ZK_ENSEMBLE", "ZK_ENSEMBLE_DIRS", "MYSQL_DSN", "MYSQL_DIR", "REDIS_ADDR", "REDIS_DIR")
	}
	code := m.Run()
	nemesisEnsembles.close()
	os.RemoveAll(dir)
	writeReliabilityTable()
	os.Exit(code)
}

// replica is one orderd process.
type replica struct {
	name, addr, url string
	bin             string // the orderd binary; orderdBin when empty
	env             []string
	cmd             *exec.Cmd
	log             *os.File
	t               *testing.T
}

// startReplicas starts n orderd processes on one database with the given settings.
func startReplicas(t *testing.T, n int, dsn string, zkServers []string, settings ...string) []*replica {
	t.Helper()
	testenv.DeleteZKTreeAtCleanup(t, zkServers, "/zkstock/fleets/"+fleetOf(t, dsn))
	var rs []*replica
	for i := 1; i <= n; i++ {
		r := newReplica(t, fmt.Sprintf("order%d", i), dsn, zkServers, settings...)
		r.start()
		rs = append(rs, r)
	}
	for _, r := range rs {
		r.waitReady(30 * time.Second)
	}
	return rs
}

// newReplica is a replica named name, not started yet, on a free port, in the fleet of dsn's
// database; settings come last, so they override the defaults.
func newReplica(t *testing.T, name, dsn string, zkServers []string, settings ...string) *replica {
	return newReplicaAs(t, name, dsn, testenv.ServiceDSN(t, dsn), zkServers, settings...)
}

// newReplicaAs is newReplica with the service's DSN given: serviceDSN, the same database as
// dsn's as the service's user (a Galera cluster's user, say, not the one server's).
func newReplicaAs(t *testing.T, name, dsn, serviceDSN string, zkServers []string, settings ...string) *replica {
	addr := testenv.FreeAddr(t)
	r := &replica{name: name, addr: addr, url: "http://" + addr, t: t}
	r.env = append([]string{"HTTP_ADDR=" + addr, "REPLICA_ID=" + r.name, "ZK_SERVERS=" + strings.Join(zkServers, ","),
		"MYSQL_DSN=" + serviceDSN, "MYSQL_MIGRATE_DSN=" + dsn, "ADMIN_TOKEN=faults", "LOG_LEVEL=info", "FLEET=" + fleetOf(t, dsn)}, settings...)
	return r
}

// fleetOf is the fleet of the replicas on one database: the database's name, so that every
// scenario's replicas are a fleet of their own, whose mode no earlier scenario set.
func fleetOf(t *testing.T, dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.DBName
}

func (r *replica) start(extra ...string) {
	r.t.Helper()
	logDir := r.t.TempDir()
	if d := os.Getenv("FAULTS_LOG_DIR"); d != "" { // kept after the test, for reading a failure whole
		logDir = d
	}
	logPath := filepath.Join(logDir, r.name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	r.log = f
	bin := orderdBin
	if r.bin != "" {
		bin = r.bin
	}
	r.cmd = exec.Command(bin)
	r.cmd.Env = append(append(os.Environ(), r.env...), extra...)
	r.cmd.Stdout, r.cmd.Stderr = f, f
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	cmd := r.cmd
	r.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
		if r.t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				r.t.Logf("%s log (tail):\n%s", r.name, tail(string(b), 30))
			}
		}
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (r *replica) waitReady(d time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(r.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s not ready after %v", r.name, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *replica) signal(sig syscall.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal %v to %s: %v", sig, r.name, err)
	}
}

// kill9 kills the process and reaps it.
func (r *replica) kill9() {
	r.signal(syscall.SIGKILL)
	_ = r.cmd.Wait()
}

var httpc = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

// call sends a JSON request; status 0 means the connection failed or was cut.
func call(method, url, body string, headers ...string) (int, map[string]any) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

func reset(t *testing.T, r *replica, sku string, stock int) {
	t.Helper()
	if st, m := call("PUT", r.url+"/admin/products/"+sku, fmt.Sprintf(`{"stock":%d}`, stock), "Authorization", "Bearer faults"); st != 200 {
		t.Fatalf("reset %s: %d %v", sku, st, m)
	}
}

// outcome is what a buyer saw for one idempotency key.
type outcome struct {
	status int // 0: the connection was cut
	code   string
	at     time.Time     // when the answer came
	took   time.Duration // how long it took
}

// buyers fire purchases until stopped, round-robin over the replicas, each with a unique
// Idempotency-Key, and remember every answer.
type buyers struct {
	mu       sync.Mutex
	outcomes map[string]outcome
	stop     chan struct{}
	wg       sync.WaitGroup
	lin      *linHistory // recorded beside the buyers, checked at halt (linearizable_test.go)
}

func startBuyers(rs []*replica, sku string, n int, pause time.Duration) *buyers {
	b := &buyers{outcomes: map[string]outcome{}, stop: make(chan struct{}), lin: startHistory(rs)}
	for g := 0; g < n; g++ {
		b.wg.Add(1)
		go func(g int) {
			defer b.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-b.stop:
					return
				default:
				}
				r := rs[(g+i)%len(rs)]
				key := fmt.Sprintf("%s-b%d-%d", r.name, g, i)
				start := time.Now()
				st, m := call("POST", r.url+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku), "Idempotency-Key", key)
				code, _ := m["code"].(string)
				b.mu.Lock()
				b.outcomes[key] = outcome{status: st, code: code, at: time.Now(), took: time.Since(start)}
				b.mu.Unlock()
				if st == 0 || st >= 500 {
					time.Sleep(50 * time.Millisecond)
				} else if pause > 0 {
					time.Sleep(pause)
				}
			}
		}(g)
	}
	return b
}

func (b *buyers) halt() map[string]outcome {
	close(b.stop)
	b.wg.Wait()
	b.lin.check()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.outcomes
}

// waitSale waits for the first purchase answered 201 after from, and returns when that was.
func (b *buyers) waitSale(t *testing.T, from time.Time, d time.Duration, what string) time.Time {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if at, ok := firstSuccessAfter(b.snapshot(), from); ok {
			return at
		}
		if time.Now().After(deadline) {
			t.Fatalf("no purchase succeeded %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (b *buyers) snapshot() map[string]outcome {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]outcome, len(b.outcomes))
	for k, v := range b.outcomes {
		out[k] = v
	}
	return out
}

// verdict checks the audit and that the answers and the orders agree: every 201 is an order, and
// every order was answered 201 or its buyer's connection was cut. It returns the audit and a count
// of answers by code.
func verdict(t *testing.T, dsn, sku string, outcomes map[string]outcome, exact bool) (inventory.Audit, map[string]int) {
	t.Helper()
	ctx := context.Background()
	store := openStore(t, dsn)
	defer store.Close()
	orders, err := store.Orders(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int{}
	for _, o := range outcomes {
		switch {
		case o.status == 0:
			codes["cut"]++
		case o.code != "":
			codes[fmt.Sprintf("%d %s", o.status, o.code)]++
		default:
			codes[fmt.Sprint(o.status)]++
		}
	}
	inDB := map[string]bool{}
	for _, o := range orders {
		if o.RequestID == nil {
			continue
		}
		inDB[*o.RequestID] = true
		// 503 outcome_unknown says the purchase may have been sold: true whether it was or not.
		if out, ok := outcomes[*o.RequestID]; ok && out.status != 201 && out.status != 0 && out.status != 200 && out.code != "outcome_unknown" {
			t.Errorf("order for %s exists but its buyer was answered %d %s", *o.RequestID, out.status, out.code)
		}
	}
	for key, o := range outcomes {
		if o.status == 201 && !inDB[key] {
			t.Errorf("%s was answered 201 but no order exists", key)
		}
		if o.status >= 500 && o.status != 503 {
			t.Errorf("%s was answered %d %s: only clean 503s are allowed", key, o.status, o.code)
		}
	}
	a, err := store.Audit(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if exact && (a.Oversold != 0 || a.LostUpdates != 0) {
		t.Errorf("audit not exact: %+v", a)
	}
	return a, codes
}

// lockHolder returns the owner of the lock's holding node, or "".
func lockHolder(r *replica, sku string) string {
	_, m := call("GET", r.url+"/v1/products/"+sku+"/lock", "")
	q, _ := m["queue"].([]any)
	for _, e := range q {
		if n, ok := e.(map[string]any); ok && n["holder"] == true {
			owner, _ := n["owner"].(string)
			return owner
		}
	}
	return ""
}

func waitHolder(t *testing.T, observer *replica, sku, owner string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for lockHolder(observer, sku) != owner {
		if time.Now().After(deadline) {
			t.Fatalf("%s never held the lock of %s", owner, sku)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// firstSuccessAfter is when the first purchase answered 201 after t0, and by whom.
func firstSuccessAfter(outcomes map[string]outcome, t0 time.Time) (time.Time, bool) {
	var times []time.Time
	for _, o := range outcomes {
		if o.status == 201 && o.at.After(t0) {
			times = append(times, o.at)
		}
	}
	if len(times) == 0 {
		return time.Time{}, false
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	return times[0], true
}

// The reliability table: one row per scenario, written to out/reliability-table.md after a run.
type reliabilityRow struct{ scenario, injected, behaviour, stall, audit string }

var (
	rowsMu sync.Mutex
	rows   = map[string]reliabilityRow{}
)

func record(r reliabilityRow) {
	rowsMu.Lock()
	rows[r.scenario] = r
	rowsMu.Unlock()
}

func fmtAudit(a inventory.Audit) string {
	return fmt.Sprintf("sold %d of %d, stock %d, oversold %d, lost updates %d", a.UnitsSold, a.InitialStock, a.Stock, a.Oversold, a.LostUpdates)
}

func writeReliabilityTable() {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	if len(rows) == 0 {
		return
	}
	var keys []string
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("| scenario | injected | what the system did | stall | audit |\n| --- | --- | --- | ---: | --- |\n")
	for _, k := range keys {
		r := rows[k]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.scenario, r.injected, r.behaviour, r.stall, r.audit)
	}
	path := os.Getenv("FAULTS_TABLE")
	if path == "" {
		path = filepath.Join("..", "out", "reliability-table.md")
	}
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "write reliability table:", err)
		return
	}
	fmt.Fprintf(os.Stderr, "reliability table written to %s\n%s", path, b.String())
}

// lockedModes are the modes every scenario runs in: the fair lock one purchase at a time, and a
// replica's purchases coalesced under one lease.
var lockedModes = []string{"zk", "zk-batch"}

// inEachMode runs a scenario as one subtest per locked mode.
func inEachMode(t *testing.T, scenario func(t *testing.T, mode string)) {
	for _, mode := range lockedModes {
		t.Run(mode, func(t *testing.T) { scenario(t, mode) })
	}
}

// checkTokensGrow: orders are inserted inside the critical section, so with one holder at a time
// their fencing tokens grow with their ids. Two overlapping holders would break the order. In
// zk-batch the orders of one batch share their lease's token.
func checkTokensGrow(t *testing.T, dsn, sku, mode string) {
	t.Helper()
	ctx := context.Background()
	store := openStore(t, dsn)
	defer store.Close()
	orders, err := store.Orders(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(orders); i++ {
		prev, cur := orders[i-1].FenceToken, orders[i].FenceToken
		if cur < prev || (cur == prev && mode != "zk-batch") {
			t.Fatalf("order %d has token %d after order %d with %d: two holders overlapped",
				orders[i].ID, orders[i].FenceToken, orders[i-1].ID, orders[i-1].FenceToken)
		}
	}
}

// ordersWithKeys counts the SKU's orders recorded under any of the idempotency keys.
func ordersWithKeys(t *testing.T, dsn, sku string, keys []string) int {
	t.Helper()
	ctx := context.Background()
	store := openStore(t, dsn)
	defer store.Close()
	n := 0
	for _, k := range keys {
		o, found, err := store.OrderByRequestID(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if found && o.SKU == sku {
			n++
		}
	}
	return n
}

// openStore opens the test's database for checks; the caller closes it.
func openStore(t *testing.T, dsn string) *inventory.Store {
	t.Helper()
	store, err := inventory.Open(context.Background(), dsn, inventory.PoolOptions{MaxOpen: 2})
	if err != nil {
		t.Fatal(err)
	}
	return store
}
