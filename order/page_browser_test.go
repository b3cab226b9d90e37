package order_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/loadtest"
)

// browser is headless Debian Chromium driven by chromedp, with the flags this closed network needs;
// it collects the page's console errors and uncaught exceptions.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	bin := testenv.Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser and its tab
		t.Fatalf("start chromium: %v", err)
	}
	var mu sync.Mutex
	var problems []string
	err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				problems = append(problems, fmt.Sprintf("console.error: %v", ev.Args))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, fmt.Sprintf("exception: %s (line %d)", ev.ExceptionDetails.Text, ev.ExceptionDetails.LineNumber))
		}
	})
	if err != nil {
		t.Fatalf("listen to the page: %v", err)
	}
	return ctx, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), problems...) }
}

func textOf(ctx context.Context, id string) (string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf("document.getElementById(%q).textContent", id)))
}

func count(ctx context.Context, css string) (int, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", css)))
}

// waitPage polls the page until cond holds.
func waitPage(t *testing.T, ctx context.Context, within time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// screenshotDir is where the page's pictures go: out/ by default, docs/images for make screenshots.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join("..", "out")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// What a person sees on the live page of three replicas while a load runs with the lock off, then
// on: the oversold figure turns red in none; in zk the queue shows waiters during the load and is
// empty after, and the stock reaches 0; in zk-herd the wake-ups run ahead of the purchases; no
// console errors. Screenshots of each go to out/ (docs/images with make screenshots).
func TestLivePageInChromium(t *testing.T) {
	ctx, problems := browser(t)
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: 15 * time.Millisecond})
	urls := []string{rs[0].URL, rs[1].URL, rs[2].URL}
	// Each load has a product, and a page, of its own: the page's rates, over its last 2 s, are
	// then that load's only.
	sku := ""
	open := func(product string) {
		sku = product
		resetStock(t, rs[0], sku, 50)
		if err := chromedp.Do(ctx, chromedp.Navigate(rs[0].URL+"/?sku="+sku)); err != nil {
			t.Fatalf("open the page: %v", err)
		}
		waitPage(t, ctx, 10*time.Second, "the page live", func() (bool, error) {
			s, err := textOf(ctx, "status")
			return s == "live", err
		})
	}
	measured := func() bool {
		window, err := textOf(ctx, "rates-window")
		if err != nil {
			t.Fatal(err)
		}
		return strings.HasPrefix(window, "over the last")
	}
	load := func(mode string) chan error {
		done := make(chan error, 1)
		go func() {
			rep, err := loadtest.Run(context.Background(), loadtest.Config{Targets: urls, SKU: sku, Stock: 50, Requests: 240, Concurrency: 30,
				Qty: 1, Modes: []string{mode}, AdminToken: ordertest.AdminToken, Timeout: 30 * time.Second}, quietProgress{})
			if err == nil && mode != "none" {
				err = rep.Check()
			}
			done <- err
		}()
		return done
	}
	open("PAGE-1")
	if err := <-load("none"); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, 10*time.Second, "oversold shown in red", func() (bool, error) {
		n, err := textOf(ctx, "oversold")
		if err != nil {
			return false, err
		}
		red, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`getComputedStyle(document.getElementById("oversold")).color === "rgb(248, 81, 73)"`))
		if err != nil {
			return false, err
		}
		v, _ := strconv.Atoi(n)
		shown, err := textOf(ctx, "orders")
		if err != nil {
			return false, err
		}
		// The last update has come: the page shows every order the load made, and its rates.
		return v > 0 && red && shown == strconv.FormatInt(auditOf(t, rs[0], sku).Orders, 10) && measured(), nil
	})
	screenshot(t, ctx, "live-page-none.png")

	open("PAGE-ZK")
	most := 0
	shot := false
	whileLoading(t, load("zk"), 40*time.Millisecond, func() {
		nodes, err := count(ctx, "#queue .node")
		if err != nil {
			t.Fatal(err)
		}
		arrows, err := count(ctx, "#queue .arrow")
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, nodes)
		orders, err := textOf(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(orders); nodes >= 4 && arrows == nodes-1 && n >= 10 && !shot && measured() {
			screenshot(t, ctx, "live-page-zk.png")
			shot = true
		}
	})
	if most < 2 || !shot {
		t.Fatalf("the queue never showed waiters with their arrows during the zk load (at most %d nodes)", most)
	}
	waitPage(t, ctx, 10*time.Second, "stock 0 and sold out, queue empty, nothing oversold", func() (bool, error) {
		stock, err := textOf(ctx, "stock")
		if err != nil {
			return false, err
		}
		queued, err := textOf(ctx, "queue-count")
		if err != nil {
			return false, err
		}
		oversold, err := textOf(ctx, "oversold")
		if err != nil {
			return false, err
		}
		nodes, err := count(ctx, "#queue .node")
		if err != nil {
			return false, err
		}
		note, err := textOf(ctx, "stock-note")
		if err != nil {
			return false, err
		}
		return stock == "0" && note == "sold out" && queued == "0" && nodes == 0 && oversold == "0", nil
	})
	modes, err := textOf(ctx, "modes")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"order1: zk", "order2: zk", "order3: zk"} {
		if !containsText(modes, want) {
			t.Fatalf("the replicas' modes read %q, want %q among them", modes, want)
		}
	}
	t.Logf("most nodes seen in the queue during the zk load: %d", most)

	// The herd recipe: every waiter watches the lock path, so a release wakes them all; the page's
	// wake-ups per second run far ahead of its purchases per second.
	open("PAGE-HERD")
	herdShot := false
	whileLoading(t, load("zk-herd"), 100*time.Millisecond, func() {
		rates, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](
			`[Number(document.getElementById("rate-purchases").textContent), Number(document.getElementById("rate-wakeups").textContent)]`))
		if err != nil {
			t.Fatal(err)
		}
		arrows, err := count(ctx, "#queue .arrow")
		if err != nil {
			t.Fatal(err)
		}
		if arrows != 0 {
			t.Fatalf("mode zk-herd: the page draws %d predecessor arrows, but every herd waiter watches the path", arrows)
		}
		orders, err := textOf(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(orders); n >= 10 && len(rates) == 2 && rates[0] > 0 && rates[1] > 3*rates[0] && !herdShot && measured() {
			// The replicas are shown in the mode the load runs in, not the one before it.
			modes, err := textOf(ctx, "modes")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"order1: zk-herd", "order2: zk-herd", "order3: zk-herd"} {
				if !containsText(modes, want) {
					t.Fatalf("the page shows the herd's rates with the replicas reading %q, without %q", modes, want)
				}
			}
			screenshot(t, ctx, "live-page-herd.png")
			herdShot = true
			t.Logf("zk-herd: %.1f purchases/s against %.1f watch wake-ups/s on order1", rates[0], rates[1])
		}
	})
	if !herdShot {
		t.Fatal("the page never showed the herd: watch wake-ups/s never ran 3 times ahead of purchases/s in mode zk-herd")
	}
	if p := problems(); len(p) > 0 {
		t.Fatalf("the page logged errors: %v", p)
	}
}

func containsText(s, sub string) bool { return strings.Contains(s, sub) }

// whileLoading looks at the page every period until the load is done.
func whileLoading(t *testing.T, done <-chan error, period time.Duration, look func()) {
	t.Helper()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		case <-time.After(period):
			look()
		}
	}
}

type quietProgress struct{}

func (quietProgress) Start(string, int) {}
func (quietProgress) Add(int)           {}
func (quietProgress) Finish()           {}
