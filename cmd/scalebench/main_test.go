package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkstock/zkstock/scalebench"
)

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-skus", "0"}, {"-skus", "x"}, {"-requests", "0", "-zk-servers", "a:1", "-mysql-dsn", "x"}, {"stray"}, {"-modes", "", "-zk-servers", "a:1", "-mysql-dsn", "x"}} {
		var errb bytes.Buffer
		if code := run(context.Background(), args, io.Discard, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}

// -report turns run files into the tables and the charts, without servers.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	run1 := scalebench.Result{Setup: "standalone ZooKeeper", Limits: scalebench.Limits{ZooKeeperPairs: 6000, DBCommits: 9000, Sessions: 3, Connections: 48},
		Cells: []scalebench.Cell{
			{Setup: "standalone ZooKeeper", Mode: "zk", SKUs: 1, Dist: "uniform", Throughput: 117, Exact: true, ZKOpsPerSale: 5, SalesPerLock: 1, ZKCeiling: 6000, DBCeiling: 9000, Binding: "ZooKeeper", BindingRatio: 117.0 / 6000},
			{Setup: "standalone ZooKeeper", Mode: "zk", SKUs: 10, Dist: "zipf", Throughput: 287, Exact: true, ZKOpsPerSale: 4, SalesPerLock: 1, ZKCeiling: 6000, DBCeiling: 9000, Binding: "ZooKeeper", BindingRatio: 287.0 / 6000},
		}}
	raw, err := json.Marshal(run1)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "run.json")
	if err := os.WriteFile(in, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(dir, "scale.md")
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"-report", in, "-markdown", md, "-charts", dir}, io.Discard, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	table, err := os.ReadFile(md)
	if err != nil || !strings.Contains(string(table), "| zk | 10 | zipf | 287 |") || !strings.Contains(string(table), "**6000** create+delete pairs/s") {
		t.Fatalf("tables: %v\n%s", err, table)
	}
	for _, f := range []string{"scale-standalone-zookeeper-uniform.svg", "scale-standalone-zookeeper-zipf.svg"} {
		if svg, err := os.ReadFile(filepath.Join(dir, f)); err != nil || !strings.Contains(string(svg), "<svg") {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if code := run(context.Background(), []string{"-report", filepath.Join(dir, "missing.json")}, io.Discard, io.Discard); code != 1 {
		t.Fatalf("a missing run file: exit %d, want 1", code)
	}
}
