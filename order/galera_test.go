package order_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

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

// Three replicas sell two products on the cluster in mode zk while clients buy concurrently; the
// writer's node is killed (kill -9) and later started again. Sales resume on another node, every
// answer holds to its promise (a sale's order is in the database under its key, a refusal left
// none, an unknown answer carries its key, whose look-up settles it), and the audit is exact.
func TestGaleraOrderdSellsThroughAWriterKill(t *testing.T) {
	nodes := testenv.GaleraDatabase(t)
	reps := newCluster(t, 3, clusterOpts{Nodes: nodes, Mode: order.ModeZK, LockTimeout: 20 * time.Second})
	writer := reps[0].Cluster.Writer()
	for _, r := range reps {
		if r.Cluster.Writer() != writer {
			t.Fatalf("%s writes to node %d, %s to node %d: the replicas should open on the same first ready node", r.Name, r.Cluster.Writer()+1, reps[0].Name, writer+1)
		}
	}
	victim := strconv.Itoa(writer + 1)
	skus := []string{"gk-a", "gk-b"}
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
				a := galeraAttempt{key: fmt.Sprintf("gk-%d-%d", c, n), sku: skus[(c+n)%len(skus)], start: time.Now()}
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
	killed := time.Now()
	testenv.GaleraControl(t, "kill", victim)
	t.Logf("node %s (the writer) killed", victim)
	time.Sleep(20 * time.Second)
	restarted := time.Now()
	t.Logf("node %s restarted: %s", victim, testenv.GaleraControl(t, "restart", victim))
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	for _, r := range reps {
		if r.Cluster.Writer() == writer {
			t.Errorf("%s still writes to the killed node %s", r.Name, victim)
		}
	}
	sort.Slice(attempts, func(i, j int) bool { return attempts[i].end.Before(attempts[j].end) })
	// The failover: from the kill to the first sale of a purchase sent after it, and, per
	// product, the longest time between two sales answered (the later after the kill).
	var resume time.Duration = -1
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
		if resume < 0 && a.start.After(killed) {
			resume = a.end.Sub(killed)
		}
	}
	t.Logf("%d purchases: %v", len(attempts), counts)
	if resume < 0 {
		t.Fatalf("no purchase sent after the kill was sold (node %s killed, restarted %v later)", victim, restarted.Sub(killed).Round(time.Millisecond))
	}
	t.Logf("failover: the first purchase sent after the kill sold %v after it", resume.Round(time.Millisecond))
	for _, sku := range skus {
		t.Logf("failover: %s went at most %v without a sale", sku, longest[sku].Round(time.Millisecond))
	}
	// Galera holds writes 5-6 s until it evicts the dead node; a purchase whose COMMIT went
	// unanswered holds its product's lock until its commit bound (11 s) has passed.
	if resume > 15*time.Second {
		t.Errorf("sales resumed %v after the kill, want within 15 s", resume.Round(time.Millisecond))
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
