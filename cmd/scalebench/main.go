// Command scalebench measures purchases per second against the number of SKUs for several lock
// modes on running replicas, next to the raw limits of their ZooKeeper and database, and names the
// limit that binds each cell. `make scale` runs it twice, with a standalone ZooKeeper and with a
// 3-node ensemble, and writes the tables and charts.
//
//	scalebench -label standalone -zk-servers HOST:PORT,... -mysql-dsn DSN -json out/scale-standalone.json
//	scalebench -report out/scale-standalone.json,out/scale-ensemble.json -markdown out/scale.md -charts docs/images
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/zkstock/zkstock/loadtest"
	"github.com/zkstock/zkstock/scalebench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scalebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		label       = fs.String("label", "standalone", "the ZooKeeper setup, for the report")
		targets     = fs.String("targets", "http://localhost:8081,http://localhost:8082,http://localhost:8083", "comma-separated replica URLs")
		adminToken  = fs.String("admin-token", os.Getenv("ADMIN_TOKEN"), "the replicas' admin token (default $ADMIN_TOKEN)")
		zkServers   = fs.String("zk-servers", os.Getenv("ZK_SERVERS"), "the replicas' ZooKeeper, for the raw limit (default $ZK_SERVERS)")
		dsn         = fs.String("mysql-dsn", os.Getenv("MYSQL_DSN"), "the replicas' database, for the raw limit (default $MYSQL_DSN)")
		skus        = fs.String("skus", "1,10,100,1000", "comma-separated catalogue sizes")
		dists       = fs.String("dists", "uniform,zipf", "comma-separated spreads")
		zipfS       = fs.Float64("zipf-s", 1.1, "the zipf exponent")
		modes       = fs.String("modes", "zk,zk-batch,db-forupdate,db-cas,redis-fenced", "comma-separated lock modes")
		requests    = fs.Int("requests", 1500, "purchases per cell")
		concurrency = fs.Int("concurrency", 48, "purchases in flight (and database connections of the raw limit)")
		rawFor      = fs.Duration("raw-for", 5*time.Second, "how long each raw limit is measured")
		serversOnly = fs.String("servers-only", "", "comma-separated strings: a server or replica process counts as one only when its command line holds one (default: every one)")
		jsonOut     = fs.String("json", "", "write the run to this file")
		report      = fs.String("report", "", "instead of running: read these comma-separated run files")
		markdown    = fs.String("markdown", "", "with -report: write the tables to this file")
		charts      = fs.String("charts", "", "with -report: write the charts into this directory")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "scalebench: unexpected arguments %v\n", fs.Args())
		return 2
	}
	if *report != "" {
		return writeReport(loadtest.SplitList(*report), *markdown, *charts, stdout, stderr)
	}
	cfg := scalebench.Config{Label: *label, Targets: loadtest.SplitList(*targets), AdminToken: *adminToken, ZKServers: loadtest.SplitList(*zkServers),
		MySQLDSN: *dsn, Dists: loadtest.SplitList(*dists), ZipfS: *zipfS, Modes: loadtest.SplitList(*modes), Requests: *requests,
		Concurrency: *concurrency, RawFor: *rawFor, ServersOnly: loadtest.SplitList(*serversOnly)}
	for _, s := range loadtest.SplitList(*skus) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "scalebench: -skus: %q is not a whole number from 1\n", s)
			return 2
		}
		cfg.SKUCounts = append(cfg.SKUCounts, n)
	}
	if len(cfg.Targets) == 0 || len(cfg.ZKServers) == 0 || cfg.MySQLDSN == "" || len(cfg.Modes) == 0 || len(cfg.Dists) == 0 || *requests < 1 || *concurrency < 1 {
		fmt.Fprintln(stderr, "scalebench: -targets, -zk-servers, -mysql-dsn, -modes and -dists are needed, -requests and -concurrency at least 1")
		return 2
	}
	res, err := scalebench.Run(ctx, cfg, func(s string) { fmt.Fprintln(stderr, "scalebench: "+s) })
	if *jsonOut != "" {
		raw, jerr := json.MarshalIndent(res, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(*jsonOut, raw, 0o644)
		}
		if jerr != nil {
			fmt.Fprintf(stderr, "scalebench: %v\n", jerr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "scalebench: %v\n", err)
		return 1
	}
	if err := scalebench.WriteMarkdown(stdout, []scalebench.Result{res}); err != nil {
		fmt.Fprintf(stderr, "scalebench: %v\n", err)
		return 1
	}
	return 0
}

func writeReport(files []string, markdown, charts string, stdout, stderr io.Writer) int {
	var results []scalebench.Result
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(stderr, "scalebench: %v\n", err)
			return 1
		}
		var r scalebench.Result
		if err := json.Unmarshal(raw, &r); err != nil {
			fmt.Fprintf(stderr, "scalebench: %s: %v\n", f, err)
			return 1
		}
		results = append(results, r)
	}
	out := stdout
	if markdown != "" {
		f, err := os.Create(markdown)
		if err != nil {
			fmt.Fprintf(stderr, "scalebench: %v\n", err)
			return 1
		}
		defer f.Close()
		out = f
	}
	if err := scalebench.WriteMarkdown(out, results); err != nil {
		fmt.Fprintf(stderr, "scalebench: %v\n", err)
		return 1
	}
	if charts != "" {
		names, err := scalebench.WriteCharts(charts, results)
		if err != nil {
			fmt.Fprintf(stderr, "scalebench: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "scalebench: wrote %s\n", strings.Join(names, ", "))
	}
	return 0
}
