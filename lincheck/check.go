package lincheck

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
)

// Verdict is what Porcupine found of a history.
type Verdict struct {
	History *History
	// Outcome is Porcupine's: Ok (linearizable), Illegal (not), or Unknown (the check timed out,
	// which proves nothing either way).
	Outcome   porcupine.CheckResult
	CheckTime time.Duration
	info      porcupine.LinearizationInfo
}

// Linearizable reports whether Porcupine found a linearization.
func (r Verdict) Linearizable() bool { return r.Outcome == porcupine.Ok }

// Check checks the history with Porcupine against the model of two SKUs' stock; timeout bounds
// the search (0: none).
func (h *History) Check(timeout time.Duration) Verdict {
	start := time.Now()
	out, info := porcupine.CheckOperationsVerbose(Model(h.SKUs, h.Stock), h.Ops, timeout)
	info.AddAnnotations(h.Annotations)
	return Verdict{History: h, Outcome: out, CheckTime: time.Since(start), info: info}
}

// Visualize writes Porcupine's HTML visualization of the history and the longest linearizations
// it found to path, making its directory if needed. Open it in a browser: each client is a row,
// each operation a bar from call to return; an operation no linearization could place is red.
func (r Verdict) Visualize(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("lincheck: visualization: %w", err)
	}
	if err := porcupine.VisualizePath(Model(r.History.SKUs, r.History.Stock), r.info, path); err != nil {
		return fmt.Errorf("lincheck: visualization: %w", err)
	}
	return nil
}
