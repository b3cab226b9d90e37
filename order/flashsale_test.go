package order_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// buyAll sends n purchases of one unit of sku at once, spread over the replicas, each with its own
// key, and returns the answers in the order sent.
func buyAll(t *testing.T, rs []*replica, sku string, n int, keyPrefix string) []reply {
	t.Helper()
	replies := make([]reply, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i] = buy(t, rs[i%len(rs)], sku, 1, fmt.Sprintf("%s-%d", keyPrefix, i))
		}()
	}
	close(start)
	wg.Wait()
	return replies
}

func sumMetric(t *testing.T, rs []*replica, name string) int {
	t.Helper()
	n := 0
	for _, r := range rs {
		n += metricValue(t, r, name)
	}
	return n
}

const (
	leftQueueMetric   = `zkstock_sold_out_fast_total{where="left_queue"}`
	beforeQueueMetric = `zkstock_sold_out_fast_total{where="before_queue"}`
)

// A flash sale on three replicas in mode zk: 60 buyers at once for 3 units, each turn of the lock
// 30 ms long. Exactly 3 are sold and every other buyer is told out_of_stock (not 503 after the
// lock's timeout), most of them sent away from the lock's queue by a read of the stock rather than
// served a turn each. Then a buyer on every replica is answered before queueing, and a
// cancellation on one replica makes the product sellable on another at once.
func TestSoldOutAnsweredWithoutTheQueue(t *testing.T) {
	rs := newCluster(t, 3, clusterOpts{WorkDelay: 30 * time.Millisecond})
	const sku = "FLASH-SOLDOUT"
	resetStock(t, rs[0], sku, 3)
	replies := buyAll(t, rs, sku, 60, "flash")
	var sold []reply
	for _, rep := range replies {
		switch rep.codeLine() {
		case "201 ":
			sold = append(sold, rep)
		case "409 out_of_stock":
		default:
			t.Errorf("answer %s %s: want 201 or 409 out_of_stock", rep.codeLine(), rep.raw)
		}
	}
	if a := auditOf(t, rs[0], sku); len(sold) != 3 || a.UnitsSold != 3 || a.Stock != 0 || a.LostUpdates != 0 {
		t.Fatalf("%d sold, audit %+v: want 3 sold, none left", len(sold), a)
	}
	// 57 buyers each served a turn would take 57 × 30 ms; a read of the stock sends them away.
	// Which way each of them learnt it (sent away, or read before queueing: one that arrived after
	// its replica suspected the sell-out) depends on when the goroutines' requests arrived, which a
	// loaded machine spreads; that they did not wait a turn each does not.
	left, early := sumMetric(t, rs, leftQueueMetric), sumMetric(t, rs, beforeQueueMetric)
	t.Logf("of 57 refused buyers, %d were sent away from the queue, %d answered before queueing", left, early)
	if left == 0 || left+early < 40 {
		t.Errorf("%d of 57 refused buyers were sent away from the queue and %d answered before it by a read of the stock; want most of them, some sent away", left, early)
	}

	before := sumMetric(t, rs, beforeQueueMetric)
	for i, r := range rs {
		if rep := buy(t, r, sku, 1, "after-"+strconv.Itoa(i)); rep.codeLine() != "409 out_of_stock" {
			t.Fatalf("a buyer on %s after the sell-out: %s %s", r.Name, rep.codeLine(), rep.raw)
		}
	}
	if n := sumMetric(t, rs, beforeQueueMetric) - before; n != len(rs) {
		t.Errorf("%d of %d buyers after the sell-out were answered before queueing; want all", n, len(rs))
	}

	key := sold[0].body["request_id"].(string)
	if rep := call(t, "POST", fmt.Sprintf("%s/v1/orders/%d/cancel", rs[0].URL, sold[0].orderID()), fmt.Sprintf(`{"request_id":%q}`, key)); rep.status != 200 {
		t.Fatalf("cancel: %s %s", rep.codeLine(), rep.raw)
	}
	if rep := buy(t, rs[2], sku, 1, "restocked"); rep.status != 201 {
		t.Fatalf("a buyer on %s right after a cancellation on %s: %s %s; the unit given back must sell", rs[2].Name, rs[0].Name, rep.codeLine(), rep.raw)
	}
}

// Admission control: 30 buyers teach the replicas how long a turn of the lock takes (40 ms of
// work), then 90 arrive at once with a queue budget of 300 ms. Those the queue could not serve
// within the budget are refused at once with 503 sku_busy and a Retry-After, and nothing of theirs
// was sold or left in ZooKeeper; the others are sold. Nothing else is answered.
func TestPurchasesPastTheBudgetAreRefusedAtOnce(t *testing.T) {
	rs := newCluster(t, 3, clusterOpts{WorkDelay: 40 * time.Millisecond, QueueBudget: 300 * time.Millisecond})
	const sku = "FLASH-BUSY"
	resetStock(t, rs[0], sku, 1000)
	created, busy := 0, 0
	var refusedKeys []string
	for wave, n := range []int{30, 90} {
		for _, rep := range buyAll(t, rs, sku, n, fmt.Sprintf("wave%d", wave)) {
			switch rep.codeLine() {
			case "201 ":
				created++
			case "503 sku_busy":
				busy++
				refusedKeys = append(refusedKeys, rep.body["request_id"].(string))
				if s, err := strconv.Atoi(rep.header.Get("Retry-After")); err != nil || s < 1 {
					t.Errorf("sku_busy with Retry-After %q: want a whole number of seconds, at least 1", rep.header.Get("Retry-After"))
				}
			default:
				t.Errorf("answer %s %s: want 201 or 503 sku_busy", rep.codeLine(), rep.raw)
			}
		}
	}
	if busy == 0 {
		t.Fatalf("no purchase of the 90 was refused: 30 turns a replica of 40 ms each cannot fit a 300 ms budget")
	}
	if a := auditOf(t, rs[0], sku); a.UnitsSold != int64(created) || a.LostUpdates != 0 {
		t.Fatalf("audit %+v after %d sales and %d refusals", a, created, busy)
	}
	for _, key := range refusedKeys[:min(5, len(refusedKeys))] {
		if rep := call(t, "GET", rs[1].URL+"/v1/orders?request_id="+key, ""); rep.status != 404 {
			t.Errorf("the order of refused key %s: %s %s; want 404", key, rep.codeLine(), rep.raw)
		}
	}
	q, total, err := rs[0].Locks.Queue(context.Background(), order.LockRoot+"/"+sku, 0)
	if err != nil || total != 0 {
		t.Errorf("the lock's queue after the load: %v (%d nodes), err %v; want empty", q, total, err)
	}
	t.Logf("%d sold, %d refused", created, busy)
}

// A keyed retry sent away from the queue by a read of the stock must still be answered with its
// key's outcome. A (key K) takes the last unit while C and D queue behind it; the client, tired of
// waiting, retries K on another replica, where it queues behind C and D. C's turn finds the stock
// empty (the unit went to A), the replica suspects the SKU, and its poller reads stock 0 and sends
// the retry away. Key K was sold: the retry must be answered 200 with A's order (DESIGN: "200 with
// the original order when the key was seen before"), not 409 out_of_stock.
func TestKeyedRetrySentAwayAnswersItsSale(t *testing.T) {
	rs := newCluster(t, 3, clusterOpts{WorkDelay: 300 * time.Millisecond})
	const sku = "FLASH-RETRY"
	resetStock(t, rs[0], sku, 1)
	replies := make([]reply, 4)
	var wg sync.WaitGroup
	for i, step := range []struct {
		r     *replica
		key   string
		after time.Duration
	}{{rs[0], "retry-A", 0}, {rs[1], "retry-C", 60 * time.Millisecond}, {rs[2], "retry-D", 120 * time.Millisecond}, {rs[1], "retry-A", 180 * time.Millisecond}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(step.after)
			replies[i] = buy(t, step.r, sku, 1, step.key)
		}()
	}
	wg.Wait()
	if replies[0].status != 201 {
		t.Fatalf("A: %s %s; want 201", replies[0].codeLine(), replies[0].raw)
	}
	if r := replies[3]; r.status != 200 || r.orderID() != replies[0].orderID() {
		t.Fatalf("the retry of A's key: %s %s; want 200 with A's order %d", r.codeLine(), r.raw, replies[0].orderID())
	}
}

// A flash sale's lock queue in ZooKeeper holds no more purchases than the units left: the buyers
// past the stock wait beside the queue, on their replica, for the read that answers them. Each of
// 3 replicas sells one unit first (so each has seen the stock: 8, 7 and 6 left), then 240 buyers
// come at once for the 6 left, each turn 20 ms long. The lock's waiters in ZooKeeper stay within
// what the replicas saw left (21), and a few more for the holder and the nodes being deleted (24);
// without the gate they are the burst's hundreds. Exactly 6 more are sold; every other buyer is told out_of_stock, or refused with
// nothing sold.
func TestLockQueueNoLongerThanTheStock(t *testing.T) {
	rs := newCluster(t, 3, clusterOpts{WorkDelay: 20 * time.Millisecond})
	const sku = "FLASH-GATE"
	resetStock(t, rs[0], sku, 9)
	for i, r := range rs {
		if rep := buy(t, r, sku, 1, "first-"+strconv.Itoa(i)); rep.status != 201 {
			t.Fatalf("first sale on %s: %s %s", r.Name, rep.codeLine(), rep.raw)
		}
	}
	conn := testenv.ZKConn(t, testenv.ZKServers(t))
	most := make(chan int, 1)
	stop := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				most <- n
				return
			default:
			}
			if children, _, err := conn.Children(order.LockRoot + "/" + sku); err == nil {
				n = max(n, len(children))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	replies := buyAll(t, rs, sku, 240, "burst")
	close(stop)
	waiters := <-most
	sold := 0
	for _, rep := range replies {
		switch rep.codeLine() {
		case "201 ":
			sold++
		case "409 out_of_stock", "503 sku_busy":
		default:
			t.Errorf("answer %s %s: want 201, 409 out_of_stock or 503 sku_busy", rep.codeLine(), rep.raw)
		}
	}
	t.Logf("at most %d nodes in the lock's queue for 240 buyers of 6 units", waiters)
	if a := auditOf(t, rs[0], sku); sold != 6 || a.UnitsSold != 9 || a.Stock != 0 || a.LostUpdates != 0 {
		t.Fatalf("%d of the burst sold, audit %+v: want 6 sold, 9 in all, none left", sold, a)
	}
	if waiters > 24 {
		t.Errorf("%d nodes in the lock's queue at once for 6 units left: want at most 24 (the 21 units the replicas saw left, the holder and nodes being deleted)", waiters)
	}
}

// After a sell-out, a purchase is answered out_of_stock from a read of the stock before its key
// is held, but only when its key is in no use: a key another attempt holds (on another replica,
// say, its COMMIT stuck) is waited for as before and answered request_in_progress, and a key
// that made an order is answered with that order.
func TestSoldOutBeforeTheKeyHoldHonoursKeysInUse(t *testing.T) {
	rs := newCluster(t, 1, clusterOpts{Mode: order.ModeZK, LockTimeout: time.Second})
	r := rs[0]
	const sku = "FLASH-UNHELD"
	resetStock(t, r, sku, 1)
	if rep := buy(t, r, sku, 1, "unheld-sold"); rep.status != 201 {
		t.Fatalf("the last unit: %s %s", rep.codeLine(), rep.raw)
	}
	if held, _, err := r.Store.HoldKey(context.Background(), "unheld-in-flight", "another-attempt", "elsewhere", time.Minute); err != nil || !held {
		t.Fatalf("another attempt's holding: held %v, %v", held, err)
	}
	before := metricValue(t, r, beforeQueueMetric)
	for _, c := range []struct{ key, want string }{
		{"unheld-free", "409 out_of_stock"},
		{"unheld-in-flight", "409 request_in_progress"},
		{"unheld-sold", "200 "},
		{"", "409 out_of_stock"},
	} {
		if rep := buy(t, r, sku, 1, c.key); rep.codeLine() != c.want {
			t.Errorf("a purchase under key %q after the sell-out: %s %s; want %s", c.key, rep.codeLine(), rep.raw, c.want)
		}
	}
	if n := metricValue(t, r, beforeQueueMetric) - before; n != 2 {
		t.Errorf("%d purchases answered out_of_stock before queueing; want the two with keys in no use", n)
	}
}
