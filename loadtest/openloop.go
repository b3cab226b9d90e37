package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// OpenLoop is what a mode did under a fixed arrival rate (-rate), beyond the closed loop's row.
// Every latency in it runs from the purchase's intended send time.
type OpenLoop struct {
	OfferedRPS float64 `json:"offered_rps"`
	DurationS  float64 `json:"duration_s"`
	Sends      int     `json:"sends"`
	// SendRPS is the rate the purchases really left at: below OfferedRPS when the generator fell
	// behind its schedule (SendLag says by how much; those delays count in every latency).
	SendRPS     float64      `json:"send_rps"`
	SendLagP99  float64      `json:"send_lag_p99_ms"`
	SendLagMax  float64      `json:"send_lag_max_ms"`
	GoodputRPS  float64      `json:"goodput_rps"` // sales per second, from the start to the last answer
	Classes     []ClassStats `json:"classes"`
	SoldOut     bool         `json:"sold_out"`       // the stock ran out (less than one purchase's quantity left)
	SoldOutAtMS float64      `json:"sold_out_at_ms"` // when the last sale was answered, from the start
	// AnsweredAfter are the answers that came after the sell-out, whenever their buyers came:
	// those queued before it too, whose latency includes their wait before it.
	AnsweredAfter []ClassStats `json:"answered_after_sell_out,omitempty"`
	// LaterBuyers are the purchases whose intended send time came after the sell-out: they could
	// only be told no, and how fast they were is what a flash sale's buyers see.
	LaterBuyers []ClassStats `json:"later_buyers,omitempty"`
	// Timeline is the latency of the purchases by their intended send time, in timelineBuckets
	// slices of the run: flat while the service keeps up, rising as its queue grows.
	Timeline []TimelinePoint `json:"timeline"`
}

// TimelinePoint is the latency of the purchases meant to leave in one slice of the run.
type TimelinePoint struct {
	AtMS  float64 `json:"at_ms"` // the slice's start, since the mode's start
	Sends int     `json:"sends"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
}

const timelineBuckets = 20

// runOpenLoop runs every mode at the offered rate, or steps each mode through the sweep's rates.
func runOpenLoop(ctx context.Context, a *api, cfg Config, rep *Report, progress Progress) error {
	for _, mode := range cfg.Modes {
		if len(cfg.SweepRates) == 0 {
			row, err := runOpenMode(ctx, a, cfg, mode, cfg.Rate, cfg.Stock, progress)
			if err != nil {
				return fmt.Errorf("mode %s at %d/s: %w", mode, cfg.Rate, err)
			}
			rep.Rows = append(rep.Rows, row)
			continue
		}
		for _, rate := range cfg.SweepRates {
			// A sweep measures capacity, not a sell-out: every step has stock for every purchase.
			stock := max(cfg.Stock, (countPlan(rate, cfg.Duration)+1)*cfg.Qty)
			row, err := runOpenMode(ctx, a, cfg, mode, rate, stock, progress)
			if err != nil {
				return fmt.Errorf("mode %s at %d/s: %w", mode, rate, err)
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	return nil
}

// runOpenMode resets the products to stock, switches the fleet to the mode, sends purchases at
// rate for cfg.Duration whatever the answers do, waits for every answer and reads the audit.
func runOpenMode(ctx context.Context, a *api, cfg Config, mode string, rate, stock int, progress Progress) (Row, error) {
	if err := prepareMode(ctx, a, cfg, mode, stock); err != nil {
		return Row{}, err
	}
	run, err := newRunID()
	if err != nil {
		return Row{}, err
	}
	total := countPlan(rate, cfg.Duration)
	samples := make([]sample, total)
	pick := newPicker(cfg, 1)
	falseRefused := countFalseRefusals(ctx, a, cfg.Targets)
	progress.Start(fmt.Sprintf("%s %d/s", mode, rate), total)
	var (
		wg       sync.WaitGroup
		accepted atomic.Int64
		lastSend atomic.Int64 // since the start, when the last purchase left, in ns
	)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	schedule := newPlan(rate, cfg.Duration)
	start := time.Now()
	for i := range total {
		due, _ := schedule.next()
		if wait := time.Until(start.Add(due)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			wg.Wait()
			progress.Finish()
			return Row{}, ctx.Err()
		}
		wg.Go(func() {
			sent := time.Since(start)
			for old := lastSend.Load(); int64(sent) > old && !lastSend.CompareAndSwap(old, int64(sent)); old = lastSend.Load() {
			}
			skus := pick.pick(i)
			s := openPurchase(ctx, a, cfg.Targets[i%len(cfg.Targets)], purchaseBody(skus, cfg.Qty), fmt.Sprintf("ol-%s-%s-%d-%d", run, mode, rate, i))
			s.skus = skus
			s.at = time.Since(start)
			s.latency, s.lag = s.at-due, sent-due
			made := s.status == http.StatusCreated || s.status == http.StatusOK
			if made && drawCancel(cfg.CancelRatio, accepted.Add(1)-1) {
				cancelOrder(ctx, a, cfg.Targets[(i+1)%len(cfg.Targets)], &s)
				s.cancelAt = time.Since(start)
			}
			samples[i] = s
			progress.Add(1)
		})
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
	row.Open = openLoopStats(cfg, rate, samples, time.Duration(lastSend.Load()), row)
	return row, nil
}

// openPurchase sends one purchase, once: a load balancer without retries, so that what the
// service refuses or loses is seen as it is.
func openPurchase(ctx context.Context, a *api, target string, body any, key string) sample {
	var ans purchaseAnswer
	status, err := a.do(ctx, http.MethodPost, target+"/v1/orders", body, &ans, map[string]string{"Idempotency-Key": key})
	s := sample{status: status, remaining: ans.remaining(), orderIDs: ans.orderIDs(), key: key}
	var ae *apiError
	var ne net.Error
	switch {
	case errors.As(err, &ae):
		s.code, s.shortSKU = ae.Code, ae.SKU
	case err != nil && status == 0 && errors.As(err, &ne) && ne.Timeout():
		s.code = codeClientTimeout
	case err != nil && status == 0:
		s.code = codeClientError
	}
	return s
}

// openLoopStats sums up the open loop's view of a mode: rates, the answer classes, and when the
// stock ran out and what the buyers after that were told.
func openLoopStats(cfg Config, rate int, samples []sample, lastSend time.Duration, row Row) *OpenLoop {
	o := &OpenLoop{OfferedRPS: float64(rate), DurationS: cfg.Duration.Seconds(), Sends: len(samples)}
	o.SendRPS = float64(len(samples)) / max(cfg.Duration, lastSend).Seconds()
	o.GoodputRPS = float64(row.Accepted) / row.Seconds
	lag := hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
	var lastSale time.Duration
	for _, s := range samples {
		_ = lag.RecordValue(max(1, s.lag.Microseconds()))
		if s.status == http.StatusCreated || s.status == http.StatusOK {
			lastSale = max(lastSale, s.at)
		}
	}
	o.SendLagP99, o.SendLagMax = float64(lag.ValueAtQuantile(99))/1000, float64(lag.Max())/1000
	o.Classes = classify(samples, func(sample) bool { return true })
	o.Timeline = timeline(samples, cfg.Duration)
	if row.FinalStock >= int64(cfg.Qty) {
		return o
	}
	o.SoldOut, o.SoldOutAtMS = true, ms(lastSale)
	o.AnsweredAfter = classify(samples, func(s sample) bool { return s.at > lastSale })
	o.LaterBuyers = classify(samples, func(s sample) bool { return s.at-s.latency >= lastSale })
	return o
}

// timeline buckets the samples by intended send time.
func timeline(samples []sample, d time.Duration) []TimelinePoint {
	width := max(d/timelineBuckets, time.Millisecond)
	hists := make([]*hdrhistogram.Histogram, int(d/width)+1)
	for _, s := range samples {
		i := min(int((s.at-s.latency)/width), len(hists)-1)
		if hists[i] == nil {
			hists[i] = hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
		}
		_ = hists[i].RecordValue(max(1, s.latency.Microseconds()))
	}
	var out []TimelinePoint
	for i, h := range hists {
		if h != nil {
			out = append(out, TimelinePoint{AtMS: ms(time.Duration(i) * width), Sends: int(h.TotalCount()),
				P50: float64(h.ValueAtQuantile(50)) / 1000, P99: float64(h.ValueAtQuantile(99)) / 1000})
		}
	}
	return out
}
