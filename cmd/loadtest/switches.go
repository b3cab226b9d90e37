package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/zkstock/zkstock/loadtest"
)

// runSwitches is `loadtest switches`: how long a switch of the fleet's lock mode takes while
// buyers buy on every replica (the barrier waits for the changes in flight), and that no switch
// costs an update.
func runSwitches(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest switches", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadtest switches [flags]\n\nSwitches the fleet's lock mode -n times, each through a replica drawn at random, while -concurrency buyers\nbuy on every replica; prints the switches' median, 90th percentile and longest time, and the audit.\n\nflags:")
		fs.PrintDefaults()
	}
	var (
		targets     = fs.String("targets", "http://localhost:8081,http://localhost:8082,http://localhost:8083", "comma-separated replica URLs of one fleet")
		sku         = fs.String("sku", "SWITCH-1", "product to sell")
		stock       = fs.Int("stock", 1_000_000, "initial stock (ample: the buyers must not run out)")
		concurrency = fs.Int("concurrency", 12, "purchases in flight at once")
		modes       = fs.String("modes", "zk,zk-batch", "the lock modes to switch between, in turn")
		n           = fs.Int("n", 20, "number of switches")
		pause       = fs.Duration("pause", 500*time.Millisecond, "time between one switch's answer and the next switch")
		adminToken  = fs.String("admin-token", adminTokenDefault(), "bearer token of the replicas' admin API (default $ADMIN_TOKEN or demo)")
		timeout     = fs.Duration("timeout", 60*time.Second, "timeout of one request")
		seed        = fs.Uint64("seed", 1, "seed of the replicas drawn for the switches")
		jsonOut     = fs.String("json", "", "also write the result as JSON to this file")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *n < 1 || *concurrency < 1 || *stock < 1 {
		fmt.Fprintln(stderr, "loadtest switches: -n, -concurrency and -stock must be at least 1, and no arguments follow the flags")
		fs.Usage()
		return 2
	}
	cfg := loadtest.SwitchConfig{Config: loadtest.Config{Targets: loadtest.SplitList(*targets), SKU: *sku, Stock: *stock, Concurrency: *concurrency,
		Modes: loadtest.SplitList(*modes), AdminToken: *adminToken, Timeout: *timeout}, Switches: *n, Pause: *pause, Seed: *seed}
	if len(cfg.Modes) < 2 {
		fmt.Fprintln(stderr, "loadtest switches: -modes needs at least two modes to switch between")
		return 2
	}
	rep, err := loadtest.MeasureSwitches(ctx, cfg)
	if rep != nil {
		fmt.Fprintf(stdout, "| switches | median | p90 | longest | purchases | refused | oversold | lost updates |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
		fmt.Fprintf(stdout, "| %d | %.1f ms | %.1f ms | %.1f ms | %d | %s | %d | %d |\n", len(rep.Switches), rep.MedianMS, rep.P90MS, rep.MaxMS,
			rep.Purchases, refusals(rep.Refused), rep.Audit.Oversold, rep.Audit.LostUpdates)
		fmt.Fprintf(stdout, "command: loadtest switches %s\n", strings.Join(args, " "))
		if *jsonOut != "" {
			b, _ := json.MarshalIndent(rep, "", "  ")
			if werr := os.WriteFile(*jsonOut, b, 0o644); werr != nil {
				fmt.Fprintf(stderr, "loadtest switches: write %s: %v\n", *jsonOut, werr)
				return 1
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadtest switches: %v\n", err)
		return 1
	}
	return 0
}

// refusals lists the answers other than 201 by count, "none" without any.
func refusals(by map[string]int) string {
	if len(by) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, by[k]))
	}
	return strings.Join(parts, ", ")
}
