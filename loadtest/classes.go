package loadtest

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Client-side failures, as the open loop names them among the answer classes: no answer came.
const (
	codeClientTimeout = "client_timeout" // -timeout passed before the answer
	codeClientError   = "client_error"   // the connection failed or broke
)

// ClassStats is one class of answers (201, 409 out_of_stock, 503 lock_unavailable, client
// timeout, ...): how many, and their latency. In the open loop the latency runs from the
// purchase's intended send time, so a purchase the generator sent late is not flattered.
type ClassStats struct {
	Class string  `json:"class"`
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// answerClass names an answer by its status and code: a sale is "201", a refusal "503 sku_busy";
// a 503 without a code is "503"; no answer at all is "client timeout" or "client error".
func answerClass(s sample) string {
	switch {
	case s.status == 0 && s.code == codeClientTimeout:
		return "client timeout"
	case s.status == 0:
		return "client error"
	case s.status < 300 || s.code == "":
		return fmt.Sprint(s.status)
	}
	return fmt.Sprintf("%d %s", s.status, s.code)
}

// classify counts the samples keep admits by class, with HDR histograms of their latency: sales
// first, then the other classes, the most frequent first.
func classify(samples []sample, keep func(sample) bool) []ClassStats {
	hists := map[string]*hdrhistogram.Histogram{}
	for _, s := range samples {
		if !keep(s) {
			continue
		}
		c := answerClass(s)
		h := hists[c]
		if h == nil {
			h = hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
			hists[c] = h
		}
		_ = h.RecordValue(max(1, s.latency.Microseconds()))
	}
	out := make([]ClassStats, 0, len(hists))
	for c, h := range hists {
		q := func(p float64) float64 { return float64(h.ValueAtQuantile(p)) / 1000 }
		out = append(out, ClassStats{Class: c, Count: int(h.TotalCount()), P50: q(50), P90: q(90), P99: q(99), Max: float64(h.Max()) / 1000})
	}
	sale := fmt.Sprint(http.StatusCreated)
	slices.SortFunc(out, func(a, b ClassStats) int {
		if (a.Class == sale) != (b.Class == sale) {
			if a.Class == sale {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Class, b.Class))
	})
	return out
}
