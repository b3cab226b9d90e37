package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// falseRefusalsMetric counts, on each replica, the sku_busy refusals whose buyer the queue it would
// have joined served within the budget (the replica's own judge; a lower bound).
const falseRefusalsMetric = "zkstock_false_refusals_total"

// falseRefusals sums the replicas' false-refusal counters; an error when one cannot be read, since
// a sum that misses a replica would understate them.
func falseRefusals(ctx context.Context, a *api, targets []string) (int64, error) {
	var sum int64
	var errs []error
	for _, t := range targets {
		n, err := scrapeCounter(ctx, a.http, t+"/metrics", falseRefusalsMetric)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sum += n
	}
	return sum, errors.Join(errs...)
}

// scrapeCounter reads one counter, summed over its labels, from a Prometheus text exposition; a
// counter not exposed is 0 (a replica that never judged a refusal).
func scrapeCounter(ctx context.Context, client *http.Client, url, name string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("metrics %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("metrics %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, fmt.Errorf("metrics %s: HTTP %d", url, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("metrics %s: %w", url, err)
	}
	var sum float64
	if f, ok := families[name]; ok {
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return int64(sum), nil
}

// countFalseRefusals reads the replicas' counters now and returns what reads them again: the false
// refusals between the two, nil when either reading missed a replica.
func countFalseRefusals(ctx context.Context, a *api, targets []string) func() *int64 {
	before, err := falseRefusals(ctx, a, targets)
	return func() *int64 {
		if err != nil {
			return nil
		}
		after, err := falseRefusals(ctx, a, targets)
		if err != nil {
			return nil
		}
		n := after - before
		return &n
	}
}

// Count prints a count that may not be known: "unknown" for nil.
func Count(n *int64) string {
	if n == nil {
		return "unknown"
	}
	return fmt.Sprint(*n)
}
