package scalebench

import (
	"bytes"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The meter must charge CPU to whoever spent it: this process burns a known amount, measured by
// the kernel's own account (getrusage), and the samples must find it under "generator".
func TestCPUChargesTheProcessThatSpentIt(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before, err := sampleCPU(nil)
	if err != nil {
		t.Fatal(err)
	}
	used0 := ownCPU(t)
	x := 0
	for ownCPU(t)-used0 < 400*time.Millisecond {
		for i := 0; i < 1_000_000; i++ {
			x += i ^ x
		}
	}
	burnt := ownCPU(t) - used0
	after, err := sampleCPU(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := cpuBetween(before, after, runtime.NumCPU(), 2)
	// Two "purchases": half the burnt time each. /proc counts in ticks of 10 ms.
	got := c.MsPerPurchase["generator"] * 2
	want := float64(burnt.Milliseconds())
	if got < want-30 || got > want+150 {
		t.Fatalf("the meter charged the generator %.0f ms; it burnt %.0f ms (x=%d)", got, want, x)
	}
	if c.CoresBusy <= 0 || c.CoresBusy > float64(c.Cores)+0.1 {
		t.Fatalf("%.2f of %d processors busy", c.CoresBusy, c.Cores)
	}
}

func ownCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestCPUTable(t *testing.T) {
	c := Cell{Mode: "zk", SKUs: 100, Dist: "uniform", CPU: &CPU{Cores: 2, CoresBusy: 1.93,
		MsPerPurchase: map[string]float64{"replicas": 1.5, "ZooKeeper": 0.75, "database": 0.5}}}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, []Result{{Setup: "standalone", Cells: []Cell{c}}}); err != nil {
		t.Fatal(err)
	}
	want := "| zk | 100 | uniform | 1.93 of 2 | 1.50 | 0.75 | 0.50 | 0.00 | 0.00 | 0.00 | 2.75 |"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("the CPU table lacks %q:\n%s", want, b.String())
	}
}
