package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/zkstock/zkstock/lincheck"
)

// Bad flags print the usage and exit 2, without sending anything.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-bogus"}, {"-modes", ""}, {"-replicas", " , "}, {"-duration", "0s"}, {"-clients", "0"}, {"extra"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if !strings.Contains(errOut.String(), "usage: lincheck") || out.Len() != 0 {
			t.Errorf("%v: stdout %q, stderr %q", args, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "-viz") {
		t.Errorf("-h: exit %d, %q", code, errOut.String())
	}
}

// -check checks a saved history again: exit 0 if linearizable, else 1 and the visualization.
func TestCheckFile(t *testing.T) {
	dir := t.TempDir()
	sale := func(client int, call, ret, left int64) porcupine.Operation {
		in := lincheck.Input{Kind: lincheck.Buy, Qty: [2]int64{1, 0}}
		out := lincheck.Output{Result: lincheck.OK, Remaining: [2]int64{left, 0}, Short: -1, Answer: "201"}
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out, Metadata: ""}
	}
	for _, c := range []struct {
		name string
		ops  []porcupine.Operation
		code int
	}{
		{"ok", []porcupine.Operation{sale(0, 0, 10, 8), sale(1, 1, 9, 9)}, 0},
		{"lost", []porcupine.Operation{sale(0, 0, 10, 9), sale(1, 1, 9, 9)}, 1},
	} {
		h := &lincheck.History{SKUs: [2]string{"A", "B"}, Stock: 10, Ops: c.ops}
		path := filepath.Join(dir, c.name+".json")
		if err := h.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"-check", path, "-viz", filepath.Join(dir, "viz")}, &out, &errOut)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d: %s %s", c.name, code, c.code, out.String(), errOut.String())
		}
		_, err := os.Stat(filepath.Join(dir, "viz", c.name+".html"))
		if (err == nil) != (c.code == 1) {
			t.Errorf("%s: visualization: %v; %s", c.name, err, errOut.String())
		}
	}
}
