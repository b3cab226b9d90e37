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

// falseRefusals reads each replica's false-refusal counter; an error when one cannot be read,
// since a sum that misses a replica would understate them.
func falseRefusals(ctx context.Context, a *api, targets []string) ([]int64, error) {
	counts := make([]int64, len(targets))
	var errs []error
	for i, t := range targets {
		n, err := scrapeCounter(ctx, a.http, t+"/metrics", falseRefusalsMetric)
		if err != nil {
			errs = append(errs, err)
		}
		counts[i] = n
	}
	return counts, errors.Join(errs...)
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
// refusals between the two, nil when a reading missed a replica. A lower bound: a replica judges a
// refusal from the readings of the queue that purchases make after it, so the last refusals of a
// run may go unjudged. A counter that went down (its replica restarted) counts what it shows since.
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
		var n int64
		for i := range after {
			if after[i] >= before[i] {
				n += after[i] - before[i]
			} else {
				n += after[i]
			}
		}
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
