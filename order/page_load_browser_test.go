package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/inventory"
)

// pageFigures are the live page's figures as a person reads them, and the ids of any that still
// show the placeholder dash.
type pageFigures struct {
	Status      string   `json:"status"`
	Stock       string   `json:"stock"`
	StockNote   string   `json:"stockNote"`
	Orders      string   `json:"orders"`
	UnitsSold   string   `json:"unitsSold"`
	FleetRate   string   `json:"fleetRate"`
	ReplicaRate string   `json:"replicaRate"`
	Wakeups     string   `json:"wakeups"`
	Refused     string   `json:"refused"`
	SoldOut     string   `json:"soldOut"`
	Window      string   `json:"window"`
	Modes       string   `json:"modes"`
	Dashes      []string `json:"dashes"`
}

const readFigures = `(() => {
  const t = (id) => document.getElementById(id).textContent;
  return {status: t("status"), stock: t("stock"), stockNote: t("stock-note"), orders: t("orders"), unitsSold: t("units-sold"),
    fleetRate: t("rate-fleet-purchases"), replicaRate: t("rate-purchases"), wakeups: t("rate-wakeups"), refused: t("rate-refused"),
    soldOut: t("rate-sold-out"), window: t("rates-window"), modes: t("modes"),
    dashes: [...document.querySelectorAll("main [id], header [id]")].filter((e) => e.textContent.trim() === "–").map((e) => e.id)};
})()`

func figures(t *testing.T, ctx context.Context) pageFigures {
	t.Helper()
	f, err := chromedp.Run(ctx, chromedp.Evaluate[pageFigures](readFigures))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	return f
}

func number(t *testing.T, what, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("the page shows %s as %q, not a number", what, s)
	}
	return v
}

// buyers are concurrent HTTP clients buying one unit at a time, spread over the replicas; each
// 201 is noted with the replica that answered it.
type buyers struct {
	mu    sync.Mutex
	sales []saleNoted
	other map[int]int // answers other than 201, by status (0: no answer)
}

type saleNoted struct {
	at      time.Time
	replica string
}

func startBuyers(t *testing.T, rs []*ordertest.Replica, sku string, n int) (b *buyers, stop func()) {
	b = &buyers{other: map[int]int{}}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rs[g%len(rs)]
			for {
				select {
				case <-done:
					return
				default:
				}
				status := post(r.URL+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku))
				b.mu.Lock()
				if status == http.StatusCreated {
					b.sales = append(b.sales, saleNoted{time.Now(), r.Name})
				} else {
					b.other[status]++
				}
				b.mu.Unlock()
			}
		}()
	}
	stop = sync.OnceFunc(func() { close(done); wg.Wait() })
	t.Cleanup(stop)
	return b, stop
}

func post(url, body string) int {
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// rate is the sales per second answered by replica ("": any) over the window up to now.
func (b *buyers) rate(replica string, window time.Duration) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	since, n := time.Now().Add(-window), 0
	for i := len(b.sales) - 1; i >= 0 && b.sales[i].at.After(since); i-- {
		if replica == "" || b.sales[i].replica == replica {
			n++
		}
	}
	return float64(n) / window.Seconds()
}

// auditSampler reads GET /v1/products/<sku>/audit every 100 ms, noting when.
type auditSampler struct {
	mu      sync.Mutex
	samples []auditNoted
}

type auditNoted struct {
	at time.Time
	a  inventory.Audit
}

func sampleAudits(t *testing.T, url string) *auditSampler {
	s := &auditSampler{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if a, err := auditOver(ctx, url); err == nil {
				s.mu.Lock()
				s.samples = append(s.samples, auditNoted{time.Now(), a})
				s.mu.Unlock()
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}()
	return s
}

func auditOver(ctx context.Context, url string) (inventory.Audit, error) {
	var a inventory.Audit
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return a, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("audit: %s", resp.Status)
	}
	return a, json.NewDecoder(resp.Body).Decode(&a)
}

// ordersPerSecond is the SKU's orders made (standing and cancelled) per second over the window
// up to the latest sample, as the audits read them.
func (s *auditSampler) ordersPerSecond(window time.Duration) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) < 2 {
		return math.NaN()
	}
	last := s.samples[len(s.samples)-1]
	base := s.samples[0]
	for _, x := range s.samples {
		if last.at.Sub(x.at) >= window {
			base = x
		}
	}
	made := func(a inventory.Audit) int64 { return a.Orders + a.Cancelled }
	return float64(made(last.a)-made(base.a)) / last.at.Sub(base.at).Seconds()
}

// near says whether the page's rate is within 35% (and 3/s) of the one measured outside it.
func near(shown, measured float64) bool {
	return math.Abs(shown-measured) <= 0.35*measured+3
}

// The live page opened on a replica while 24 HTTP clients buy from three: the first frame is
// drawn with the page (no "connecting", no dashes) and holds the audit's figures of that
// moment; once measured, the fleet's purchases per second match the audit's orders over the
// same window, and the replica's own match the purchases its clients saw it answer, a share of
// the fleet's; after the load the page comes to the audit's final figures and the rates to 0.
// The screenshot, live-page-load.png, is taken during the load.
func TestLivePageDuringALoad(t *testing.T) {
	ctx, problems := browser(t)
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: 15 * time.Millisecond})
	const sku, stock = "PAGE-LOAD", 100_000
	resetStock(t, rs[0], sku, stock)
	auditURL := rs[1].URL + "/v1/products/" + sku + "/audit"
	audits := sampleAudits(t, auditURL)
	load, stopLoad := startBuyers(t, rs, sku, 24)
	time.Sleep(time.Second)

	before := auditOf(t, rs[0], sku)
	if before.Orders == 0 {
		t.Fatal("the load sold nothing in its first second: this test shows nothing")
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(rs[0].URL+"/?sku="+sku)); err != nil {
		t.Fatalf("open the page: %v", err)
	}
	first := figures(t, ctx)
	after := auditOf(t, rs[0], sku)
	if first.Status == "connecting" || len(first.Dashes) > 0 {
		t.Fatalf("right after the page loaded it reads %q with dashes in %v: the first frame was not drawn with the page", first.Status, first.Dashes)
	}
	units := number(t, "units sold", first.UnitsSold)
	if units < float64(before.UnitsSold) || units > float64(after.UnitsSold) {
		t.Fatalf("the first frame shows %v units sold; the audits just before and after the page loaded read %d and %d", units, before.UnitsSold, after.UnitsSold)
	}
	if left := number(t, "stock", first.Stock); left != stock-units || first.StockNote != fmt.Sprintf("of %d", stock) {
		t.Fatalf("the first frame shows stock %v (%q) with %v units sold of %d", left, first.StockNote, units, stock)
	}
	t.Logf("first frame, as the page loaded: status %q, %v units sold (audits %d and %d), rates %q", first.Status, units, before.UnitsSold, after.UnitsSold, first.FleetRate)

	// The rates over a full window, while the load runs.
	var f pageFigures
	var window float64
	waitPage(t, ctx, 8*time.Second, "the rates measured over 2 s", func() (bool, error) {
		f = figures(t, ctx)
		_, err := fmt.Sscanf(f.Window, "over the last %g s", &window)
		return err == nil && window >= 1.9 && f.Status == "live", nil
	})
	fresh := auditOf(t, rs[0], sku)
	waitPage(t, ctx, 2*time.Second, "the page up to the audit", func() (bool, error) {
		f = figures(t, ctx)
		n, err := strconv.ParseInt(f.UnitsSold, 10, 64)
		return err == nil && n >= fresh.UnitsSold, nil
	})
	span := time.Duration(window * float64(time.Second))
	byAudit, byClients, ofReplica := audits.ordersPerSecond(span), load.rate("", span), load.rate("order1", span)
	screenshot(t, ctx, "live-page-load.png")
	fleetRate, replicaRate := number(t, "the fleet's purchases/s", f.FleetRate), number(t, "order1's purchases/s", f.ReplicaRate)
	for _, v := range []string{f.Wakeups, f.Refused, f.SoldOut} {
		number(t, "a rate", v)
	}
	t.Logf("during the load: the page shows %.1f purchases/s for the fleet and %.1f on order1 over %.1f s; the audits read %.1f/s, the clients saw %.1f/s answered, %.1f/s by order1; %s units sold",
		fleetRate, replicaRate, window, byAudit, byClients, ofReplica, f.UnitsSold)
	if !near(fleetRate, byAudit) {
		t.Errorf("the page shows %.1f purchases/s for the fleet; the audits read %.1f orders/s over the same %.1f s", fleetRate, byAudit, window)
	}
	if !near(replicaRate, ofReplica) || replicaRate >= fleetRate {
		t.Errorf("the page shows %.1f purchases/s on order1 (the fleet %.1f); its clients saw order1 answer %.1f/s", replicaRate, fleetRate, ofReplica)
	}
	if !strings.Contains(f.Modes, "order1: zk (") || strings.Contains(f.Modes, " v") {
		t.Errorf("the replicas read %q: the mode's version unexplained", f.Modes)
	}

	stopLoad()
	final := auditOf(t, rs[0], sku)
	if final.Oversold != 0 || final.LostUpdates != 0 {
		t.Fatalf("the load oversold: %+v", final)
	}
	waitPage(t, ctx, 6*time.Second, "the final figures and the rates at 0", func() (bool, error) {
		f = figures(t, ctx)
		return f.UnitsSold == strconv.FormatInt(final.UnitsSold, 10) && f.Stock == strconv.FormatInt(final.Stock, 10) &&
			f.FleetRate == "0.0" && f.ReplicaRate == "0.0", nil
	})
	load.mu.Lock()
	t.Logf("after the load: %d sales answered to the clients, other answers %v; the audit: %d orders, %d units sold", len(load.sales), load.other, final.Orders, final.UnitsSold)
	load.mu.Unlock()
	if p := problems(); len(p) > 0 {
		t.Fatalf("the page logged errors: %v", p)
	}
}
