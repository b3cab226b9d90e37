// Command loadtest fires concurrent purchases across order replicas, one lock mode at a time, and
// prints what each mode did to the stock. It exits 1 when a locked mode oversold, undersold or
// lost an update, and 2 on bad usage. `loadtest locks` instead measures the ZooKeeper lock recipes
// themselves (package lockbench).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/zkstock/zkstock/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "locks" {
		return runLocks(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "switches" {
		return runSwitches(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "flash-sale" {
		return runFlashSale(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "compare" {
		return runCompare(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: loadtest [flags]                    closed loop: -requests purchases, -concurrency in flight
       loadtest -rate N -duration D [flags]   open loop: N purchases a second for D, whatever the answers
       loadtest -sweep -rate TOP [flags]      open loop, the rate stepped up to TOP (or -sweep-rates)
       loadtest locks [flags]   (the ZooKeeper lock recipes side by side, no HTTP; -h for its flags)
       loadtest switches [flags]   (the fleet's lock-mode switches timed under load; -h for its flags)
       loadtest flash-sale UNITS.json AMPLE.json   (the flash-sale table of two open-loop reports)
       loadtest compare [-labels A,B] A.json B.json   (the same load on two setups, side by side)

Compares lock modes on a set of order replicas over HTTP. The open loop counts each answer's
latency from the purchase's intended send time (coordinated omission corrected) and reports the
answers by class (201, 409 out_of_stock, 503 and its code, client timeouts), the goodput (sales
a second), when the stock sold out and what the buyers after that were told.

flags:`)
		fs.PrintDefaults()
	}
	var (
		targets     = fs.String("targets", "http://localhost:8081,http://localhost:8082,http://localhost:8083", "comma-separated replica URLs")
		sku         = fs.String("sku", "DEMO-1", "product to sell")
		stock       = fs.Int("stock", 100, "initial stock, reset before each mode")
		requests    = fs.Int("requests", 1000, "purchases per mode")
		concurrency = fs.Int("concurrency", 50, "purchases in flight at once")
		qty         = fs.Int("qty", 1, "units per purchase")
		cart        = fs.Int("cart", 0, "sell carts of this many distinct SKUs instead of one SKU")
		skus        = fs.Int("skus", 1, "a catalogue of this many products (-sku, -sku-2, ...), each with -stock units")
		dist        = fs.String("dist", loadtest.DistUniform, "how purchases spread over the catalogue: uniform, or zipf (a hot head, a long tail)")
		zipfS       = fs.Float64("zipf-s", 1.1, "the zipf exponent, above 1: the larger, the hotter the head")
		cancelRatio = fs.Float64("cancel-ratio", 0, "share of accepted orders to cancel during the load (0 to 1); their units go back to stock")
		modes       = fs.String("modes", "none,zk", "comma-separated lock modes to compare, in order")
		adminToken  = fs.String("admin-token", adminTokenDefault(), "bearer token of the replicas' admin API (default $ADMIN_TOKEN or demo)")
		tokenFile   = fs.String("admin-token-file", os.Getenv("ADMIN_TOKEN_FILE"), "file holding the admin token, instead of -admin-token (default $ADMIN_TOKEN_FILE)")
		timeout     = fs.Duration("timeout", 30*time.Second, "timeout of one request")
		jsonOut     = fs.String("json", "", "also write the result as JSON to this file")
		htmlOut     = fs.String("html", "", "also write a self-contained HTML report with charts to this file")
		mdOut       = fs.String("markdown", "", "also write the table as Markdown to this file")
		rate        = fs.Int("rate", 0, "open loop: purchases sent per second, round-robin, for -duration per mode (0: the closed loop)")
		duration    = fs.Duration("duration", 10*time.Second, "open loop: how long each mode (each sweep step) sends")
		sweep       = fs.Bool("sweep", false, "open loop: step each mode through rising rates, each step with stock for every purchase:\n8 rates spaced evenly on a log scale from -rate/10 up to -rate (1000: 100, 139, 193, ... 720, 1000),\nor the -sweep-rates list; the report draws goodput and p99 against the offered rate")
		sweepRates  = fs.String("sweep-rates", "", "with -sweep: the rates to step through, comma-separated (as 50,100,200), instead of -rate's steps")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil || strings.TrimRight(string(b), "\r\n") == "" {
			fmt.Fprintf(stderr, "loadtest: -admin-token-file: %v\n", cmp.Or(err, fmt.Errorf("%s is empty", *tokenFile)))
			return 2
		}
		*adminToken = strings.TrimRight(string(b), "\r\n")
	}
	cfg := loadtest.Config{
		Targets: loadtest.SplitList(*targets), SKU: *sku, Stock: *stock, Requests: *requests, Concurrency: *concurrency, CancelRatio: *cancelRatio, Cart: *cart,
		Products: *skus, Dist: *dist, ZipfS: *zipfS,
		Qty: *qty, Modes: loadtest.SplitList(*modes), AdminToken: *adminToken, Timeout: *timeout,
	}
	if err := openLoopFlags(fs, &cfg, *rate, *duration, *sweep, *sweepRates); err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n\n", err)
		fs.Usage()
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadtest: unexpected arguments %v\n", fs.Args())
		fs.Usage()
		return 2
	}
	if *skus < 1 {
		cfg.Products = -1 // the flag says "from 1": let Validate say so
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n\n", err)
		fs.Usage()
		return 2
	}

	rep, err := loadtest.Run(ctx, cfg, loadtest.NewProgress(stderr))
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 1
	}
	if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 1
	}
	if err := writeOutputs(stderr, []output{{*jsonOut, rep.WriteJSON}, {*htmlOut, rep.WriteHTML}, {*mdOut, rep.WriteMarkdown}}); err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 1
	}
	if err := rep.Check(); err != nil {
		fmt.Fprintf(stderr, "loadtest: FAIL: %v\n", err)
		return 1
	}
	return 0
}

// output is a file a flag asked for, and how to write it.
type output struct {
	path  string
	write func(io.Writer) error
}

// writeOutputs writes the outputs whose path was given, saying so on stderr.
func writeOutputs(stderr io.Writer, outs []output) error {
	for _, out := range outs {
		if out.path == "" {
			continue
		}
		if err := writeFile(out.path, out.write); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", out.path)
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// adminTokenDefault is the admin token the flags default to: $ADMIN_TOKEN, or the demo's.
func adminTokenDefault() string {
	if t := os.Getenv("ADMIN_TOKEN"); t != "" {
		return t
	}
	return "demo"
}
