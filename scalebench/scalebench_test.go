package scalebench

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestBind(t *testing.T) {
	lim := Limits{ZooKeeperPairs: 2000, DBCommits: 3000}
	zk := Cell{Mode: "zk", Throughput: 1000, SalesPerLock: 1}
	zk.bind(lim, true)
	if zk.Binding != "ZooKeeper" || zk.ZKCeiling != 2000 || math.Abs(zk.BindingRatio-0.5) > 1e-9 {
		t.Fatalf("zk: %+v", zk)
	}
	batch := Cell{Mode: "zk-batch", Throughput: 9000, SalesPerLock: 4}
	batch.bind(lim, true)
	if batch.Binding != "ZooKeeper" || batch.ZKCeiling != 8000 || batch.DBCeiling != 12000 {
		t.Fatalf("zk-batch: %+v", batch)
	}
	cas := Cell{Mode: "db-cas", Throughput: 1500, SalesPerLock: 1}
	cas.bind(lim, false)
	if cas.Binding != "database" || cas.ZKCeiling != 0 || math.Abs(cas.BindingRatio-0.5) > 1e-9 {
		t.Fatalf("db-cas: %+v", cas)
	}
	// A db-forupdate cell right after a zk-batch one counts the few ZooKeeper locks of the
	// transition window (the run that found it: 1,500 purchases, 4 locks, 375 per lock); its
	// limit is still the database's, and it sells no purchases per lock.
	if got := salesPerLock("db-forupdate", 1500, 4); got != 1 {
		t.Errorf("db-forupdate after a transition window: %v purchases per lock, want 1", got)
	}
	if got := salesPerLock("zk-batch", 1500, 100); got != 15 {
		t.Errorf("zk-batch: %v purchases per lock, want 15", got)
	}
	for _, mode := range []string{"none", "db-forupdate", "db-cas", "db-locktable", "redis", "redis-fenced"} {
		if locksWithZooKeeper(mode) {
			t.Errorf("%s counted as a ZooKeeper mode", mode)
		}
	}
	for _, mode := range []string{"zk", "zk-unfenced", "zk-herd", "zk-batch"} {
		if !locksWithZooKeeper(mode) {
			t.Errorf("%s not counted as a ZooKeeper mode", mode)
		}
	}
	forUpdate := Cell{Mode: "db-forupdate", Throughput: 1500, SalesPerLock: salesPerLock("db-forupdate", 1500, 4), ZKOpsPerSale: 0.01}
	forUpdate.bind(lim, locksWithZooKeeper(forUpdate.Mode))
	if forUpdate.Binding != "database" || !locksWithZooKeeper("zk-batch") || !locksWithZooKeeper("zk") {
		t.Fatalf("db-forupdate: %+v", forUpdate)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, []Result{{Setup: "standalone", Limits: lim, Cells: []Cell{zk, cas, forUpdate}}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| zk | 0 |", "ZooKeeper (2000/s) | 50% |", "| db-cas |", "database (3000/s) | 50% |", "| db-forupdate | 0 |  | 1500 | 0.0 | 0.0 | 0.0 | — | database"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("the table lacks %q:\n%s", want, b.String())
		}
	}
}
