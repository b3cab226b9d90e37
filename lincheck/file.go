package lincheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
)

// savedOp is an operation as WriteFile saves it.
type savedOp struct {
	Client       int
	Call, Return int64
	Input        Input
	Output       Output
	Metadata     string
}

type savedHistory struct {
	SKUs        [2]string
	Stock       int64
	Ops         []savedOp
	Annotations []porcupine.Annotation
	Stats       Stats
	Broken      []BrokenPromise
	Took        time.Duration
}

// WriteFile saves the history as JSON, making the file's directory if needed, so that it can be
// checked again with ReadHistory (by `lincheck -check FILE`, say, outside a test run under the
// race detector, which slows Porcupine down several times).
func (h *History) WriteFile(path string) error {
	s := savedHistory{SKUs: h.SKUs, Stock: h.Stock, Annotations: h.Annotations, Stats: h.Stats, Broken: h.Broken, Took: h.Took}
	for _, op := range h.Ops {
		meta, _ := op.Metadata.(string)
		s.Ops = append(s.Ops, savedOp{Client: op.ClientId, Call: op.Call, Return: op.Return, Input: op.Input.(Input), Output: op.Output.(Output), Metadata: meta})
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("lincheck: save history: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("lincheck: save history: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("lincheck: save history: %w", err)
	}
	return nil
}

// ReadHistory reads a history that WriteFile saved.
func ReadHistory(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lincheck: read history: %w", err)
	}
	var s savedHistory
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("lincheck: read history %s: %w", path, err)
	}
	h := &History{SKUs: s.SKUs, Stock: s.Stock, Annotations: s.Annotations, Stats: s.Stats, Broken: s.Broken, Took: s.Took}
	for _, op := range s.Ops {
		h.Ops = append(h.Ops, porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: op.Return, Input: op.Input, Output: op.Output, Metadata: op.Metadata})
	}
	return h, nil
}
