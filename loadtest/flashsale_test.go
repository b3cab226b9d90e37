package loadtest

import (
	"strings"
	"testing"
	"time"
)

func TestFlashSaleTable(t *testing.T) {
	cfg := Config{Rate: 1000, Duration: 10 * time.Second, Stock: 100}
	units := &Report{Config: cfg, Rows: []Row{{Mode: "zk", UnitsSold: 100, Open: &OpenLoop{SoldOut: true, SoldOutAtMS: 700,
		LaterBuyers: []ClassStats{{Class: "409 out_of_stock", Count: 2909, P50: 4900, P99: 5100}, {Class: "503 lock_unavailable", Count: 5239, P50: 5200, P99: 5300}}}}}}
	cfg.Stock = 1000000
	ample := &Report{Config: cfg, Rows: []Row{{Mode: "zk", Open: &OpenLoop{Sends: 10000, GoodputRPS: 54,
		Classes: []ClassStats{{Class: "201", Count: 700, P50: 2000, P99: 5000}, {Class: "503 lock_unavailable", Count: 9300, P50: 5200, P99: 5300}}}}}}
	var b strings.Builder
	if err := WriteFlashSale(&b, units, ample); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| mode | 100 units, 1,000 buyers/s for 10s", "| zk | 100 sold in 700 ms; then 2,909 × `409 out_of_stock` p50 4.9 s, p99 5.1 s, 5,239 × `503 lock_unavailable`",
		"| **54/s**; 700 × `201` (7%) p50 2.0 s, p99 5.0 s, 9,300 × `503 lock_unavailable` (93%)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// A sell-out that came after the last buyer (the lock's queue outlasted the sale) has no later
// buyers: the cell says what the queued ones were told after it.
func TestFlashSaleTableSoldOutAfterTheLastBuyer(t *testing.T) {
	cfg := Config{Rate: 1000, Duration: 3 * time.Second, Stock: 100}
	units := &Report{Config: cfg, Rows: []Row{{Mode: "zk", UnitsSold: 100, Open: &OpenLoop{SoldOut: true, SoldOutAtMS: 5600,
		AnsweredAfter: []ClassStats{{Class: "409 out_of_stock", Count: 553, P50: 5100, P99: 5500}}}}}}
	var b strings.Builder
	if err := WriteFlashSale(&b, units, units); err != nil {
		t.Fatal(err)
	}
	if want := "| zk | 100 sold in 5.6 s, after the last buyer came; answered after it: 553 × `409 out_of_stock` p50 5.1 s, p99 5.5 s |"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
}
