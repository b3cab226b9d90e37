package order_test

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/chromedp/chromedp"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/lincheck"
	"github.com/zkstock/zkstock/order"
)

// linCheckTimeout bounds Porcupine's search; a search that times out proves nothing and fails.
const linCheckTimeout = 30 * time.Second

// checkHistory records a history with lincheck and checks it with Porcupine. A history found not
// linearizable, or not decided in time, gets its visualization in out/porcupine/<test>-<mode>.html
// at the repository root.
func checkHistory(t *testing.T, name string, cfg lincheck.Config) lincheck.Verdict {
	t.Helper()
	h, err := lincheck.Record(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := h.Check(linCheckTimeout)
	st := h.Stats
	t.Logf("%s: %d operations checked, recorded in %v; %d answers of unknown outcome (a retry found %d done, %d not done); Porcupine: %s in %v; answers %v",
		name, st.Ops, h.Took.Round(time.Millisecond), st.Unknown, st.FoundDone, st.FoundNotDone, v.Outcome, v.CheckTime.Round(time.Millisecond), st.Answers)
	if st.BadRequests > 0 || st.BadAnswers > 0 {
		t.Errorf("%d requests answered 400 and %d successes without the documented fields: the test or the API is wrong:\n%s",
			st.BadRequests, st.BadAnswers, strings.Join(st.Problems, "\n"))
	}
	for _, b := range h.Broken {
		t.Errorf("%s: a broken promise: %s", name, b)
	}
	if v.Outcome != porcupine.Ok {
		base := filepath.Join("..", "out", "porcupine", strings.NewReplacer("/", "-").Replace(t.Name()))
		if err := v.Visualize(base + ".html"); err != nil {
			t.Errorf("write the visualization: %v", err)
		} else if abs, err := filepath.Abs(base + ".html"); err == nil {
			t.Logf("Porcupine's visualization of the history: %s", abs)
		}
		// Under the race detector Porcupine runs several times slower: an undecided check may
		// decide outside it, with go run ./cmd/lincheck -check FILE -viz DIR.
		if err := h.WriteFile(base + ".json"); err != nil {
			t.Errorf("save the history: %v", err)
		} else if abs, err := filepath.Abs(base + ".json"); err == nil {
			t.Logf("the history, to check again outside the race detector: go run ./cmd/lincheck -check %s -viz out/porcupine", abs)
		}
	}
	return v
}

// wantRichHistory fails unless the history had sales, sell-outs and restocks: a history without
// them would check little.
func wantRichHistory(t *testing.T, st lincheck.Stats) {
	t.Helper()
	a := st.Answers
	if st.Ops < 100 || a["buy 201"]+a["cart 201"] == 0 || a["buy 409 out_of_stock"]+a["cart 409 out_of_stock"] == 0 || a["cancel 200"] == 0 || a["read 200"] == 0 {
		t.Errorf("the history lacks sales, sell-outs, restocks or reads (%d operations): %v", st.Ops, a)
	}
}

// Twelve clients buy single SKUs and carts of both, cancel their own orders and read the stock on
// three replicas, in every lock mode; Porcupine checks each history against a sequential model of
// the two SKUs' stock. Every locked mode is linearizable; none, with 2 ms of work inside what
// should be the critical section and a small stock, is not (the negative control: the check can
// fail). A last history switches the replicas' lock mode ten times while it runs.
func TestLinearizable(t *testing.T) {
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: 2 * time.Millisecond, LockTimeout: 5 * time.Second})
	urls := []string{rs[0].URL, rs[1].URL, rs[2].URL}
	cfg := func(name string, stock int64, d time.Duration) lincheck.Config {
		return lincheck.Config{Replicas: urls, AdminToken: ordertest.AdminToken, SKUs: [2]string{"LIN-" + name + "-A", "LIN-" + name + "-B"},
			Stock: stock, MaxQty: 2, Clients: 12, Duration: d, MaxOps: 1500, RequestTimeout: 15 * time.Second}
	}
	for _, mode := range order.LockModes {
		t.Run(string(mode), func(t *testing.T) {
			c := cfg(string(mode), 30, 3*time.Second)
			c.Mode = string(mode)
			if mode == order.ModeNone {
				c.Stock = 10
			}
			v := checkHistory(t, string(mode), c)
			if mode == order.ModeNone {
				if v.Outcome != porcupine.Illegal {
					t.Fatalf("mode none was found %s, want Illegal: without a lock concurrent deductions overwrite each other, and the check must see it", v.Outcome)
				}
				return
			}
			wantRichHistory(t, v.History.Stats)
			if v.Outcome != porcupine.Ok {
				t.Fatalf("mode %s: the history is %s, not linearizable (visualization in out/porcupine/, see above)", mode, v.Outcome)
			}
		})
	}
	// A flash sale: a small stock, cancellations giving units back. Purchases of a
	// suspected SKU are answered by a read of the stock before they queue, and queued ones are
	// sent away by the poller's reads (soldout.go): those 409s must be as true as the lock's.
	t.Run("flash-sale", func(t *testing.T) {
		c := cfg("flash", 6, 3*time.Second)
		c.Mode = string(order.ModeZK)
		fast := func() int {
			n := 0
			for _, r := range rs {
				n += metricValue(t, r, leftQueueMetric) + metricValue(t, r, beforeQueueMetric)
			}
			return n
		}
		before := fast()
		v := checkHistory(t, "flash-sale", c)
		wantRichHistory(t, v.History.Stats)
		if n := fast() - before; n == 0 {
			t.Errorf("no purchase was answered out_of_stock without a turn of the lock: the history did not exercise the sold-out path")
		} else {
			t.Logf("%d purchases answered out_of_stock by a read of the stock", n)
		}
		if v.Outcome != porcupine.Ok {
			t.Fatalf("a flash sale: the history is %s, not linearizable (visualization in out/porcupine/, see above)", v.Outcome)
		}
	})
	// The negative control of the one above: a cached "sold out" flag, trusted without a read of
	// the stock, refuses purchases that a cancellation made sellable again, and the check must
	// see it.
	t.Run("flash-sale-trusting-a-flag", func(t *testing.T) {
		fs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: 2 * time.Millisecond, LockTimeout: 5 * time.Second})
		for _, r := range fs {
			r.Srv.TrustSoldOutSuspicion()
		}
		c := cfg("flashflag", 6, 3*time.Second)
		c.Replicas, c.Mode = []string{fs[0].URL, fs[1].URL, fs[2].URL}, string(order.ModeZK)
		if v := checkHistory(t, "flash-sale-trusting-a-flag", c); v.Outcome != porcupine.Illegal {
			t.Fatalf("a sold-out flag trusted without a read was found %s, want Illegal: the check cannot tell a cached 409 from a true one", v.Outcome)
		}
	})
	t.Run("switching", func(t *testing.T) {
		c := cfg("switch", 30, 8*time.Second)
		c.Mode = string(order.ModeZK)
		c.Switches = []string{"zk-herd", "zk", "redis-fenced", "zk", "zk-batch", "zk-herd", "redis-fenced", "zk-unfenced", "zk"}
		c.MaxOps = 3000
		v := checkHistory(t, "switching", c)
		wantRichHistory(t, v.History.Stats)
		if n := len(v.History.Annotations); n != len(c.Switches) {
			t.Errorf("%d switches made, want %d", n, len(c.Switches))
		}
		if v.Outcome != porcupine.Ok {
			t.Fatalf("switching modes %v under load: the history is %s, not linearizable (visualization in out/porcupine/, see above)", c.Switches, v.Outcome)
		}
	})
}

// Porcupine's visualization of a history in mode none renders in headless Chromium without
// errors, and "jump to first error" selects an operation that no linearization can place next
// (red). The picture goes to out/porcupine-none.png (docs/images with make screenshots) for
// tutorial 9.
func TestLinearizabilityPicture(t *testing.T) {
	ctx, problems := browser(t)
	rs := ordertest.Start(t, 3, ordertest.Options{Mode: order.ModeNone, WorkDelay: 2 * time.Millisecond})
	h, err := lincheck.Record(ctx, lincheck.Config{Replicas: []string{rs[0].URL, rs[1].URL, rs[2].URL}, AdminToken: ordertest.AdminToken,
		SKUs: [2]string{"PIC-A", "PIC-B"}, Stock: 10, MaxQty: 2, Clients: 12, Duration: 2 * time.Second, MaxOps: 300})
	if err != nil {
		t.Fatal(err)
	}
	v := h.Check(linCheckTimeout)
	if v.Outcome != porcupine.Illegal {
		t.Fatalf("mode none: %d operations found %s, want Illegal", h.Stats.Ops, v.Outcome)
	}
	page := filepath.Join(t.TempDir(), "none.html")
	if err := v.Visualize(page); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page)); err != nil {
		t.Fatalf("open the visualization: %v", err)
	}
	waitPage(t, ctx, 10*time.Second, "the history drawn", func() (bool, error) {
		n, err := count(ctx, ".history-rect")
		return n >= h.Stats.Ops, err
	})
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#jump-link").dispatchEvent(new MouseEvent("click", {bubbles: true}))`)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, 10*time.Second, "an operation selected, with a red next step", func() (bool, error) {
		sel, err := count(ctx, ".history-rect.selected")
		if err != nil {
			return false, err
		}
		red, err := chromedp.Run(ctx, chromedp.Evaluate[int](
			`[...document.querySelectorAll(".linearization-invalid.linearization-point")].filter(e => !e.closest(".hidden")).length`))
		return sel == 1 && red > 0, err
	})
	time.Sleep(time.Second) // the jump scrolls smoothly
	if p := problems(); len(p) > 0 {
		t.Fatalf("the visualization logged errors: %v", p)
	}
	dir := cmp.Or(os.Getenv("SCREENSHOT_DIR"), filepath.Join("..", "out"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "porcupine-none.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations, %s; picture: %s", h.Stats.Ops, v.Outcome, path)
}
