package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkstock/zkstock/loadtest"
)

func TestCompareCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, rows ...loadtest.Row) string {
		raw, err := json.Marshal(loadtest.Report{Rows: rows})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a := write("a.json", loadtest.Row{Mode: "zk", Accepted: 100, Seconds: 1}, loadtest.Row{Mode: "zk-batch", Accepted: 800, Seconds: 2})
	b1 := write("b1.json", loadtest.Row{Mode: "zk", Accepted: 90, Seconds: 1})
	b2 := write("b2.json", loadtest.Row{Mode: "zk-batch", Accepted: 600, Seconds: 2})
	var out, stderr strings.Builder
	if code := run(context.Background(), []string{"compare", "-labels", "one,galera", a, b1 + "," + b2}, &out, &stderr); code != 0 {
		t.Fatalf("compare: exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"sales/s, galera", "| zk | 100 | 90 | 0.90× |", "| zk-batch | 400 | 300 | 0.75× |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	for _, bad := range [][]string{{"compare", a}, {"compare", "-labels", "one", a, b1}, {"compare", "-nope", a, b1}} {
		if code := run(context.Background(), bad, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", bad, code)
		}
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"compare", a, filepath.Join(dir, "missing.json")}, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "missing.json") {
		t.Errorf("a missing report: exit %d, %q; want 1 naming it", code, stderr.String())
	}
}
