package loadtest

import (
	"strings"
	"testing"
)

func TestWriteComparisonSideBySide(t *testing.T) {
	one := &Report{Rows: []Row{
		{Mode: "zk", Accepted: 2000, Seconds: 10, Throughput: 250, P50: 12, P99: 40, UnitsSold: 1000},
		{Mode: "db-cas", Accepted: 1000, Seconds: 10, P50: 20, P99: 1500, UnitsSold: 1000},
	}}
	galera := &Report{Rows: []Row{{Mode: "zk", Accepted: 1500, Seconds: 10, Throughput: 400, P50: 15, P99: 60, UnitsSold: 1000}}}
	galera2 := &Report{Rows: []Row{{Mode: "none", Accepted: 3000, Seconds: 10, UnitsSold: 990, Oversold: 3}}}
	var b strings.Builder
	if err := WriteComparison(&b, "one", "galera", []*Report{one}, []*Report{galera, galera2}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| zk | 200 | 150 | 0.75× | 12 ms / 40 ms | 15 ms / 60 ms | exact (1,000 sold) | exact (1,000 sold) |",
		"| db-cas | 100 | — | — | 20 ms / 1.5 s |",
		"| none | — | 300 | — |",
		"**oversold 3, lost updates 0, undersold 0**",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "| zk |") > strings.Index(out, "| db-cas |") || strings.Index(out, "| db-cas |") > strings.Index(out, "| none |") {
		t.Errorf("rows not in the first side's order, then the second's:\n%s", out)
	}
}

func TestWriteComparisonOpenLoopUsesGoodputAndSales(t *testing.T) {
	open := func(goodput float64) *Report {
		return &Report{Config: Config{Rate: 200}, Rows: []Row{{Mode: "zk-batch", Throughput: 999, Open: &OpenLoop{GoodputRPS: goodput,
			Classes: []ClassStats{{Class: "503 sku_busy", Count: 5, P50: 1, P99: 2}, {Class: "201", Count: 100, P50: 30, P99: 2500}}}}}}
	}
	var b strings.Builder
	if err := WriteComparison(&b, "one", "galera", []*Report{open(200)}, []*Report{open(160)}); err != nil {
		t.Fatal(err)
	}
	if want := "| zk-batch | 200 | 160 | 0.80× | 30 ms / 2.5 s | 30 ms / 2.5 s |"; !strings.Contains(b.String(), want) {
		t.Errorf("the table lacks %q:\n%s", want, b.String())
	}
	if !strings.Contains(b.String(), "sales/s (goodput)") {
		t.Errorf("an open loop's column is not the goodput:\n%s", b.String())
	}
	closed := &Report{Rows: []Row{{Mode: "zk-batch", Accepted: 10, Seconds: 1}}}
	if err := WriteComparison(&b, "one", "galera", []*Report{open(200)}, []*Report{closed}); err == nil {
		t.Error("an open loop compared with a closed loop: no error")
	}
}
