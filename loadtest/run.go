package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Progress hears how a mode's purchases go.
type Progress interface {
	Start(mode string, total int)
	Add(n int)
	Finish()
}

// Run compares the modes one after the other on the same SKU and returns the report.
func Run(ctx context.Context, cfg Config, progress Progress) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := newAPI(cfg)
	defer a.close()
	rep := newReport(cfg)
	if cfg.OpenLoop() {
		return rep, runOpenLoop(ctx, a, cfg, rep, progress)
	}
	for _, mode := range cfg.Modes {
		row, err := runMode(ctx, a, cfg, mode, progress)
		if err != nil {
			return rep, fmt.Errorf("mode %s: %w", mode, err)
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// sample is one request's outcome.
type sample struct {
	at        time.Duration // since the mode started, when the answer came
	latency   time.Duration
	status    int
	code      string
	remaining int64
	failovers int           // replicas tried before the one that answered
	lag       time.Duration // the open loop's: how late the purchase left after its intended send time
	orderIDs  []int64       // the purchase's order, or a cart's orders
	key       string        // the purchase's Idempotency-Key: the capability to cancel its orders
	skus      []string
	shortSKU  string // a cart's first short item, when it was sold out
	// The cancellation of the order, when this purchase drew one (-cancel-ratio).
	cancelTried  bool
	cancelled    bool          // 200: the units are back
	cancelStatus int           // otherwise
	cancelAt     time.Duration // since the mode started, when the cancellation was answered
}

func runMode(ctx context.Context, a *api, cfg Config, mode string, progress Progress) (Row, error) {
	if err := prepareMode(ctx, a, cfg, mode, cfg.Stock); err != nil {
		return Row{}, err
	}
	samples := make([]sample, cfg.Requests)
	run, err := newRunID()
	if err != nil {
		return Row{}, err
	}
	pick := newPicker(cfg, 1) // the same products for every mode: the modes are compared on one load
	falseRefused := countFalseRefusals(ctx, a, cfg.Targets)
	progress.Start(mode, cfg.Requests)
	start := time.Now()
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	var accepted atomic.Int64 // orders accepted so far, which the cancellations are drawn from
	for i := 0; i < cfg.Requests; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			progress.Finish()
			return Row{}, ctx.Err()
		}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			t0 := time.Now()
			skus := pick.pick(i)
			s := purchase(ctx, a, cfg.Targets, i, purchaseBody(skus, cfg.Qty), fmt.Sprintf("lt-%s-%s-%d", run, mode, i))
			s.skus = skus
			s.at, s.latency = time.Since(start), time.Since(t0)
			made := s.status == http.StatusCreated || s.status == http.StatusOK // 200: a retry found it made
			if made && drawCancel(cfg.CancelRatio, accepted.Add(1)-1) {
				cancelOrder(ctx, a, cfg.Targets[(i+1)%len(cfg.Targets)], &s)
				s.cancelAt = time.Since(start)
			}
			samples[i] = s
			progress.Add(1)
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	progress.Finish()

	audits, err := auditAll(ctx, a, cfg)
	if err != nil {
		return Row{}, err
	}
	row := summarize(mode, cfg, samples, elapsed, audits)
	row.Started = start
	row.FalseRefusals = falseRefused()
	return row, nil
}

// auditAll reads every product's audit.
func auditAll(ctx context.Context, a *api, cfg Config) (map[string]Audit, error) {
	audits := make(map[string]Audit, len(cfg.SKUs()))
	var mu sync.Mutex
	err := forEachSKU(ctx, cfg.SKUs(), func(ctx context.Context, sku string) error {
		audit, err := auditAny(ctx, a, cfg.Targets, sku)
		mu.Lock()
		audits[sku] = audit
		mu.Unlock()
		return err
	})
	return audits, err
}

// prepareMode resets the products to stock units and switches the fleet to the mode.
func prepareMode(ctx context.Context, a *api, cfg Config, mode string, stock int) error {
	admin := cfg.Targets[0]
	if err := forEachSKU(ctx, cfg.SKUs(), func(ctx context.Context, sku string) error {
		_, err := a.do(ctx, http.MethodPut, admin+"/admin/products/"+sku, map[string]int{"stock": stock}, nil, a.adminHeader())
		return err
	}); err != nil {
		return fmt.Errorf("reset the products on %s: %w", admin, err)
	}
	// The mode is the fleet's: one switch through any replica switches them all; each target is
	// then asked, so that a target of another fleet is found before it skews the row.
	if _, err := a.do(ctx, http.MethodPut, admin+"/admin/lock-mode", map[string]string{"mode": mode}, nil, a.adminHeader()); err != nil {
		return fmt.Errorf("switch the fleet to %s through %s: %w", mode, admin, err)
	}
	for _, t := range cfg.Targets {
		var got struct {
			Mode string `json:"mode"`
		}
		if _, err := a.do(ctx, http.MethodGet, t+"/admin/lock-mode", nil, &got, a.adminHeader()); err != nil {
			return fmt.Errorf("read the mode of %s: %w", t, err)
		}
		if got.Mode != mode {
			return fmt.Errorf("%s runs %s after the fleet was switched to %s through %s: it is in another fleet (FLEET)", t, got.Mode, mode, admin)
		}
	}

	return nil
}

// purchaseBody is a purchase of one SKU, or of a cart.
func purchaseBody(skus []string, qty int) any {
	if len(skus) == 1 {
		return map[string]any{"sku": skus[0], "qty": qty}
	}
	items := make([]map[string]any, len(skus))
	for j, sku := range skus {
		items[j] = map[string]any{"sku": sku, "qty": qty}
	}
	return map[string]any{"items": items}
}

// purchase sends purchase i to its replica (round robin). A replica that cannot be reached, or
// whose connection breaks before it answers, is a client's reason to go to the next one, as behind
// a load balancer: the Idempotency-Key makes the retry safe, because a purchase the first replica
// did commit is answered from its stored order instead of being sold twice.
func purchase(ctx context.Context, a *api, targets []string, i int, body any, key string) sample {
	s := sample{key: key}
	for attempt := 0; attempt < len(targets); attempt++ {
		target := targets[(i+attempt)%len(targets)]
		var ans purchaseAnswer
		status, err := a.do(ctx, http.MethodPost, target+"/v1/orders", body, &ans, map[string]string{"Idempotency-Key": key})
		s = sample{status: status, remaining: ans.remaining(), failovers: attempt, orderIDs: ans.orderIDs(), key: key}
		var ae *apiError
		switch {
		case errors.As(err, &ae):
			s.code, s.shortSKU = ae.Code, ae.SKU
		case err != nil:
			s.code = "transport"
		}
		if s.code != "transport" || ctx.Err() != nil {
			break
		}
	}
	return s
}

// drawCancel says whether the n-th accepted order (from 0) is cancelled: a share ratio of them,
// spread evenly over the run. Counting accepted orders, not requests, keeps the share true when
// most requests are sold out: drawn by request, every draw could fall on a refusal.
func drawCancel(ratio float64, n int64) bool {
	return ratio > 0 && int64(float64(n+1)*ratio) > int64(float64(n)*ratio)
}

// cancelOrder cancels the sample's orders (a cart's, one by one) on a replica other than the one
// that sold them, with the purchase's key, as its buyer would.
func cancelOrder(ctx context.Context, a *api, target string, s *sample) {
	s.cancelTried, s.cancelled = true, true
	for _, id := range s.orderIDs {
		status, err := a.do(ctx, http.MethodPost, fmt.Sprintf("%s/v1/orders/%d/cancel", target, id), map[string]string{"request_id": s.key}, nil, nil)
		if err != nil || status != http.StatusOK {
			s.cancelled, s.cancelStatus = false, status
		}
	}
}

// auditAny asks the replicas in turn for the SKU's audit, so that one replica down does not lose
// the result.
func auditAny(ctx context.Context, a *api, targets []string, sku string) (Audit, error) {
	var errs []error
	for _, t := range targets {
		var audit Audit
		_, err := a.do(ctx, http.MethodGet, t+"/v1/products/"+sku+"/audit", nil, &audit, nil)
		if err == nil {
			return audit, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", t, err))
	}
	return Audit{}, fmt.Errorf("audit %s: %w", sku, errors.Join(errs...))
}

// newRunID keeps one run's Idempotency-Keys apart from every other run's.
func newRunID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("run id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// summarize is one mode's row. With several SKUs the stock figures are their sums, a cart counts
// once among the requests, accepted and sold out, and the row names the SKU the worst off.
func summarize(mode string, cfg Config, samples []sample, elapsed time.Duration, audits map[string]Audit) Row {
	row := Row{
		Mode: mode, Requests: len(samples), ErrorCodes: map[string]int{}, SKUs: len(audits),
		Seconds: elapsed.Seconds(), Throughput: float64(len(samples)) / elapsed.Seconds(),
	}
	worst := int64(0)
	for _, sku := range slices.Sorted(maps.Keys(audits)) {
		a := audits[sku]
		row.InitialStock += a.InitialStock
		row.FinalStock += a.Stock
		row.Orders += a.Orders
		row.UnitsSold += a.UnitsSold
		row.Oversold += a.Oversold
		row.LostUpdates += a.LostUpdates
		row.UnitsRestocked += a.UnitsRestocked
		if off := a.Oversold + a.LostUpdates; off > worst {
			worst, row.WorstSKU = off, sku
		}
	}
	hist := hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
	// When each SKU was last restocked (a cancellation answered), and whether a buyer was turned
	// away from it after that: the stock was then at most what it is now, since only sales followed.
	lastRestock := map[string]time.Duration{}
	for _, s := range samples {
		if s.cancelled {
			for _, sku := range s.skus {
				lastRestock[sku] = max(lastRestock[sku], s.cancelAt)
			}
		}
	}
	turnedAway := map[string]bool{}
	for _, s := range samples {
		switch {
		case s.cancelled:
			row.Cancelled++
		case s.cancelTried:
			row.CancelErrors++
		}
		if s.code == "out_of_stock" {
			short := s.shortSKU
			if short == "" && len(s.skus) == 1 {
				short = s.skus[0]
			}
			if short != "" && s.at-s.latency >= lastRestock[short] {
				turnedAway[short] = true
			}
		}
		_ = hist.RecordValue(max(1, s.latency.Microseconds()))
		row.Failovers += s.failovers
		switch {
		case s.status == http.StatusCreated || s.status == http.StatusOK: // 200: a retry found the order made
			row.Accepted++
			row.Sales = append(row.Sales, Sale{AtMillis: ms(s.at), Remaining: s.remaining})
		case s.code == "out_of_stock":
			row.SoldOut++
		default:
			row.Errors++
			row.ErrorCodes[s.code]++
			row.ErrorAnswers = append(row.ErrorAnswers, ErrorAnswer{AtMillis: ms(s.at), Code: s.code})
		}
	}
	// Buyers were turned away although a whole purchase was still in stock.
	for sku := range turnedAway {
		if a := audits[sku]; a.Stock >= int64(cfg.Qty) {
			row.Undersold += a.Stock
		}
	}
	q := func(p float64) float64 { return float64(hist.ValueAtQuantile(p)) / 1000 }
	row.P50, row.P95, row.P99, row.Max = q(50), q(95), q(99), float64(hist.Max())/1000
	for _, p := range []float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 97.5, 99, 99.5, 99.9, 100} {
		row.Latency = append(row.Latency, LatencyPoint{Percentile: p, Millis: q(p)})
	}
	sort.Slice(row.Sales, func(i, j int) bool { return row.Sales[i].AtMillis < row.Sales[j].AtMillis })
	return row
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
