package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/internal/answers"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/order"
)

// The tests named Galera run replicas on the three-node cluster of scripts/servers.sh --galera
// (make test-galera), each with its own view of the cluster (inventory.Cluster), as orderd opens
// it with MYSQL_NODES; without the cluster they skip.

// galeraAttempt is one purchase a client sent, and its answer.
type galeraAttempt struct {
	key, sku   string
	start, end time.Time
	status     int
	code       string
	id         int64  // the order's id, for a sale
	echoed     string // the request_id an error answer carried
}

// verifyStore is a store on a node that is up, as the database's owner, to check what the
// answers promised.
func verifyStore(t *testing.T, dsn string) *inventory.Store {
	t.Helper()
	s, err := inventory.Open(context.Background(), dsn, inventory.PoolOptions{MaxOpen: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// orderCount is how many orders hold key.
func orderCount(t *testing.T, s *inventory.Store, key string) int {
	t.Helper()
	_, found, err := s.OrderByRequestID(context.Background(), key)
	if err != nil {
		t.Fatalf("look up %s: %v", key, err)
	}
	if found {
		return 1 // request_id is a unique index: never more
	}
	return 0
}

// Three replicas sell three products on the cluster in mode zk while two clients per product buy
// concurrently, each purchase through the next replica; the writer's node is killed (kill -9)
// and later started again. Sales resume on another node, every answer holds to its promise (a
// sale's order is in the database under its key, a refusal left none, an unknown answer carries
// its key, whose look-up settles it), and the audit is exact.
func TestGaleraOrderdSellsThroughAWriterKill(t *testing.T) {
	sellThroughAFault(t, "kill", "restart", 9*time.Second, 8*time.Second)
}

// As above, with the writer's node frozen (SIGSTOP) for 13 s, then thawed: a COMMIT in flight
// there goes unanswered, and is settled on that node alone, which cannot be asked while it is
// frozen: the answer is outcome_unknown with its key, and the key's look-up settles it once
// the node is back.
func TestGaleraOrderdSellsThroughAWriterPause(t *testing.T) {
	sellThroughAFault(t, "pause", "resume", 13*time.Second, 12*time.Second)
}

// settleLimit bounds a product's pause in sales after a fault: the read timeout of a COMMIT sent
// to the lost node (10 s), then the commit bound (11 s), and slack.
const settleLimit = 25 * time.Second

// sellThroughAFault runs the clients, does fault to the writer's node after 3 s, heal after
// faultFor, and checks the answers and the audit. Sales must resume within resumeBound of the
// fault (less than faultFor: on the other nodes, before the node is back) for a product with no
// COMMIT gone unanswered, and within settleLimit for one with (an answer unknown, or a replica's
// zkstock_commits_unanswered_total): a purchase whose COMMIT went unanswered keeps its product's
// lock while it is settled (up to the COMMIT's read timeout, 10 s, then up to
// the commit bound, 11 s).
func sellThroughAFault(t *testing.T, fault, heal string, faultFor, resumeBound time.Duration) {
	nodes := testenv.GaleraDatabase(t)
	reps := newCluster(t, 3, clusterOpts{Nodes: nodes, Mode: order.ModeZK, LockTimeout: 20 * time.Second})
	writer := reps[0].Cluster.Writer()
	for _, r := range reps {
		if r.Cluster.Writer() != writer {
			t.Fatalf("%s writes to node %d, %s to node %d: the replicas should open on the same first ready node", r.Name, r.Cluster.Writer()+1, reps[0].Name, writer+1)
		}
	}
	victim := strconv.Itoa(writer + 1)
	skus := []string{"gk-a", "gk-b", "gk-c"}
	const stock = 100000
	for _, sku := range skus {
		resetStock(t, reps[0], sku, stock)
	}

	var (
		mu       sync.Mutex
		attempts []galeraAttempt
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	const clients = 6
	for c := range clients {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				r := reps[(c+n)%len(reps)]
				a := galeraAttempt{key: fmt.Sprintf("gk-%d-%d", c, n), sku: skus[c%len(skus)], start: time.Now()}
				rep := buy(t, r, a.sku, 1, a.key)
				a.end, a.status, a.code, a.id = time.Now(), rep.status, rep.code(), rep.orderID()
				a.echoed, _ = rep.body["request_id"].(string)
				mu.Lock()
				attempts = append(attempts, a)
				mu.Unlock()
				if answers.Of(rep.status, rep.code()) != answers.Done {
					time.Sleep(50 * time.Millisecond) // a failing cluster is not hammered
				}
			}
		})
	}
	time.Sleep(3 * time.Second)
	testenv.GaleraControl(t, fault, victim)
	killed := time.Now() // the node is dead or frozen once the control returns
	t.Logf("node %s (the writer): %s", victim, fault)
	healed := false
	defer func() {
		if !healed {
			testenv.GaleraControl(t, heal, victim)
		}
	}()
	time.Sleep(faultFor)
	restarted := time.Now()
	t.Logf("node %s: %s: %s", victim, heal, testenv.GaleraControl(t, heal, victim))
	if heal == "resume" {
		t.Logf("node %s: %s", victim, testenv.GaleraControl(t, "wait-synced"))
	}
	healed = true
	// On until every product has sold a purchase sent after the fault (or settleLimit has
	// passed), and a second more.
	for time.Since(killed) < settleLimit+2*time.Second {
		mu.Lock()
		resumed := map[string]bool{}
		for _, a := range attempts {
			if a.start.After(killed) && answers.Of(a.status, a.code) == answers.Done {
				resumed[a.sku] = true
			}
		}
		mu.Unlock()
		if len(resumed) == len(skus) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	// The writer may be back on the victim by now (ReturnAfter, once it is ready again): that the
	// replica left it is what its moves say.
	for _, r := range reps {
		if r.Moves.Load() == 0 {
			t.Errorf("%s never moved its writer off the node %s", r.Name, victim)
		}
	}
	sort.Slice(attempts, func(i, j int) bool { return attempts[i].end.Before(attempts[j].end) })
	// The failover, per product: from the fault to the first sale of a purchase sent after it,
	// and the longest time between two sales answered (the later after the fault).
	resume := map[string]time.Duration{}
	lastSale := map[string]time.Time{}
	longest := map[string]time.Duration{}
	counts := map[string]int{}
	for _, a := range attempts {
		counts[strconv.Itoa(a.status)+" "+a.code]++
		if answers.Of(a.status, a.code) != answers.Done {
			continue
		}
		if last, ok := lastSale[a.sku]; ok && a.end.After(killed) {
			longest[a.sku] = max(longest[a.sku], a.end.Sub(last))
		}
		lastSale[a.sku] = a.end
		if _, ok := resume[a.sku]; !ok && a.start.After(killed) {
			resume[a.sku] = a.end.Sub(killed)
		}
	}
	t.Logf("%d purchases: %v", len(attempts), counts)
	// Products whose lock a COMMIT gone unanswered kept while it was settled: an answer still
	// unknown, or a settle the replica counted (a COMMIT in flight on the frozen node is settled
	// there once it thaws, and then answered as known).
	unsettled := map[string]bool{}
	for _, a := range attempts {
		if answers.Of(a.status, a.code) == answers.Unknown {
			unsettled[a.sku] = true
		}
	}
	for _, sku := range skus {
		for _, r := range reps {
			if metricValue(t, r, `zkstock_commits_unanswered_total{sku="`+sku+`"}`) > 0 {
				unsettled[sku] = true
			}
		}
	}
	for _, sku := range skus {
		r, ok := resume[sku]
		if !ok {
			t.Errorf("%s: no purchase sent after the %s was sold (node %s, %s %v later)", sku, fault, victim, heal, restarted.Sub(killed).Round(time.Millisecond))
			continue
		}
		t.Logf("failover (%s): %s: the first purchase sent after it sold %v after it; at most %v without a sale (a COMMIT settled: %v)", fault, sku,
			r.Round(time.Millisecond), longest[sku].Round(time.Millisecond), unsettled[sku])
		// Galera holds writes 5-6 s until it evicts the lost node; settling an unanswered
		// COMMIT keeps the product's lock longer.
		limit := resumeBound
		if unsettled[sku] {
			limit = settleLimit
		}
		if r > limit {
			t.Errorf("%s: sales resumed %v after the %s, want within %v", sku, r.Round(time.Millisecond), fault, limit)
		}
	}

	// Every answer against the database, read on a node that was not killed.
	survivor := nodes[(writer+1)%len(nodes)]
	db := verifyStore(t, survivor)
	sold := map[string]int64{}
	ids := map[int64]string{}
	unknown := 0
	for _, a := range attempts {
		n := orderCount(t, db, a.key)
		switch answers.Of(a.status, a.code) {
		case answers.Done:
			if n != 1 {
				t.Errorf("%s answered %d with order %d, but its key holds %d orders", a.key, a.status, a.id, n)
			}
			if prev, dup := ids[a.id]; dup {
				t.Errorf("order %d answered to %s and %s", a.id, prev, a.key)
			}
			ids[a.id] = a.key
			sold[a.sku]++
		case answers.NotDone:
			if n != 0 {
				t.Errorf("%s answered %d %s (nothing sold), but its key holds an order", a.key, a.status, a.code)
			}
		default:
			unknown++
			if a.echoed != a.key {
				t.Errorf("%s answered %d %s without its key (request_id %q)", a.key, a.status, a.code, a.echoed)
			}
			// The key's look-up through a replica settles it.
			rep := call(t, "GET", reps[0].URL+"/v1/orders?request_id="+a.key, "")
			switch {
			case rep.status == 200 && n == 1:
				sold[a.sku]++
				t.Logf("%s answered %s: settled by its look-up as sold (order %d)", a.key, a.code, rep.orderID())
			case rep.status == 404 && n == 0:
				t.Logf("%s answered %s: settled by its look-up as not sold", a.key, a.code)
			default:
				t.Errorf("%s answered %s: its look-up says %s, the database %d orders", a.key, a.code, rep.codeLine(), n)
			}
		}
	}
	t.Logf("%d answers unknown, each settled by its key", unknown)
	for _, sku := range skus {
		a, err := db.Audit(context.Background(), sku)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("audit %s: %+v", sku, a)
		if a.Oversold != 0 || a.LostUpdates != 0 || a.Stock != stock-a.UnitsSold || a.Orders != sold[sku] {
			t.Errorf("%s: audit %+v; the answers account for %d orders", sku, a, sold[sku])
		}
	}
}

// Under Galera's auto-increment control order ids step by 3 from each node's offset: nothing
// assumes they are consecutive. A purchase's and a cart's orders are looked up by their ids
// through every replica, and the cart's orders are its own rows.
func TestGaleraOrderIDsLookUpByID(t *testing.T) {
	nodes := testenv.GaleraDatabase(t)
	reps := newCluster(t, 2, clusterOpts{Nodes: nodes, Mode: order.ModeZK})
	resetStock(t, reps[0], "gid-a", 100)
	resetStock(t, reps[0], "gid-b", 100)
	type placed struct {
		id  int64
		sku string
	}
	var orders []placed
	for i := range 4 {
		rep := buy(t, reps[i%2], "gid-a", 1, fmt.Sprintf("gid-p%d", i))
		if rep.status != 201 {
			t.Fatalf("purchase %d: %d %s", i, rep.status, rep.raw)
		}
		orders = append(orders, placed{rep.orderID(), "gid-a"})
	}
	rep := buyCart(t, reps[1], "gid-cart", "gid-a", 2, "gid-b", 3)
	if rep.status != 201 {
		t.Fatalf("cart: %d %s", rep.status, rep.raw)
	}
	items, _ := rep.body["orders"].([]any)
	if len(items) != 2 {
		t.Fatalf("cart answered %d orders: %s", len(items), rep.raw)
	}
	for _, it := range items {
		o, _ := it.(map[string]any)
		id, _ := o["id"].(float64)
		sku, _ := o["sku"].(string)
		orders = append(orders, placed{int64(id), sku})
	}
	gaps := 0
	for i := 1; i < len(orders); i++ {
		if orders[i].id != orders[i-1].id+1 {
			gaps++
		}
	}
	t.Logf("order ids %v (%d steps not by one)", orders, gaps)
	if gaps == 0 {
		t.Errorf("order ids %v are consecutive: not Galera's auto-increment control (increment 3)", orders)
	}
	seen := map[int64]bool{}
	for _, o := range orders {
		if seen[o.id] {
			t.Errorf("order id %d answered twice", o.id)
		}
		seen[o.id] = true
		for _, r := range reps {
			got := call(t, "GET", fmt.Sprintf("%s/v1/orders/%d", r.URL, o.id), "")
			m, _ := got.body["order"].(map[string]any)
			if got.status != 200 || got.orderID() != o.id || m["sku"] != o.sku {
				t.Errorf("%s: GET /v1/orders/%d: %d %s, want order %d of %s", r.Name, o.id, got.status, got.raw, o.id, o.sku)
			}
		}
	}
	// An id between two of the cluster's is no order.
	if got := call(t, "GET", fmt.Sprintf("%s/v1/orders/%d", reps[0].URL, orders[0].id+1), ""); !seen[orders[0].id+1] && got.status != 404 {
		t.Errorf("GET /v1/orders/%d (no such order): %s", orders[0].id+1, got.codeLine())
	}
}

// syncBuffer is a log sink read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}

// waitLog waits until the log holds a JSON line with msg, and returns that line.
func waitLog(t *testing.T, logs *syncBuffer, msg string, within time.Duration) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(within); ; {
		for _, line := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within %v:\n%s", msg, within, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// orderd's Run with MYSQL_NODES: it opens the cluster on the first node, migrates once there as
// MYSQL_MIGRATE_DSN's user (at that node's address), sells, moves off a writer cut off from its
// peers (logged), sells on, and closes the cluster at shutdown.
func TestGaleraRunWithMySQLNodes(t *testing.T) {
	nodes := testenv.GaleraDatabase(t)
	svc := testenv.AsUser(t, nodes[0], testenv.GaleraServiceDSNs(t)[0])
	mig := testenv.AsUser(t, nodes[0], testenv.GaleraMigrateDSNs(t)[0])
	var addrs []string
	for _, n := range nodes {
		c, err := mysql.ParseDSN(n)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, c.Addr)
	}
	dbName := func() string { c, _ := mysql.ParseDSN(nodes[0]); return c.DBName }()
	testenv.DeleteZKTreeAtCleanup(t, testenv.ZKServers(t), order.FleetRoot+"/"+dbName)
	cfg, err := order.LoadConfig([]string{"-http-addr", "127.0.0.1:0", "-replica-id", "gorderd1", "-fleet", dbName,
		"-zk-servers", strings.Join(testenv.ZKServers(t), ","), "-mysql-dsn", svc, "-mysql-migrate-dsn", mig,
		"-mysql-nodes", strings.Join(addrs, ","), "-admin-token", adminToken}, env(map[string]string{"ZK_AUTH": func() string {
		u, p := testenv.ZKAuth()
		return u + ":" + p
	}()}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- order.Run(ctx, cfg, slog.New(slog.NewJSONHandler(&logs, nil))) }()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()
	if m := waitLog(t, &logs, "database: a cluster", 30*time.Second); m["writer"] != addrs[0] {
		t.Fatalf("opened with writer %v, want node 1 (%s)", m["writer"], addrs[0])
	}
	url := "http://" + waitLog(t, &logs, "orderd listening", 60*time.Second)["addr"].(string)
	r := &replica{Name: "gorderd1", URL: url}
	resetStock(t, r, "grun", 10)
	if rep := buy(t, r, "grun", 1, "grun-1"); rep.status != 201 {
		t.Fatalf("purchase on node 1: %s %s", rep.codeLine(), rep.raw)
	}

	testenv.GaleraControl(t, "isolate", "1")
	rejoined := false
	defer func() {
		if !rejoined {
			testenv.GaleraControl(t, "rejoin", "1")
		}
	}()
	moved := waitLog(t, &logs, "database: the writer moved to another node", 30*time.Second)
	t.Logf("logged: %v", moved)
	if moved["from"] != addrs[0] {
		t.Errorf("moved from %v, want node 1 (%s)", moved["from"], addrs[0])
	}
	var rep reply
	for deadline := time.Now().Add(20 * time.Second); ; {
		if rep = buy(t, r, "grun", 1, "grun-2"); rep.status == 201 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if rep.status != 201 {
		t.Fatalf("purchase after the move: %s %s", rep.codeLine(), rep.raw)
	}
	if rep := call(t, "GET", url+"/readyz", ""); rep.status != 200 {
		t.Errorf("/readyz after the move: %s %s", rep.codeLine(), rep.raw)
	}
	t.Logf("rejoin: %s", testenv.GaleraControl(t, "rejoin", "1"))
	rejoined = true
	a, err := verifyStore(t, nodes[1]).Audit(context.Background(), "grun")
	if err != nil {
		t.Fatal(err)
	}
	if a.Stock != 8 || a.Orders != 2 || a.LostUpdates != 0 {
		t.Errorf("audit %+v, want 2 orders and 8 left", a)
	}
	cancel()
	stopped = true
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("Run ended without its stop logged:\n%s", logs.String())
	}
}
