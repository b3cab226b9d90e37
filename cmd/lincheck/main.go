// Command lincheck records a concurrent history of purchases, carts, cancellations and stock reads
// against order replicas, one lock mode at a time, and checks each history for linearizability
// with Porcupine (package lincheck). It prints one row per mode and exits 1 when a history is not
// linearizable (or the check could not decide), 2 on bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zkstock/zkstock/lincheck"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lincheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lincheck [flags]\n\nRecords purchases, carts, cancellations and stock reads of two products on order replicas,\n"+
			"one lock mode at a time, and checks each history for linearizability with Porcupine.\n\nflags:")
		fs.PrintDefaults()
	}
	adminDefault := os.Getenv("ADMIN_TOKEN")
	if adminDefault == "" {
		adminDefault = "demo"
	}
	var (
		replicas   = fs.String("replicas", "http://localhost:8081,http://localhost:8082,http://localhost:8083", "comma-separated replica URLs")
		adminToken = fs.String("admin-token", adminDefault, "bearer token of the replicas' admin API ($ADMIN_TOKEN if set)")
		modes      = fs.String("modes", "none,zk", "comma-separated lock modes, one history each")
		sku        = fs.String("sku", "LIN", "the products are SKU-MODE-A and SKU-MODE-B, reset before each history")
		stock      = fs.Int64("stock", 20, "each product's initial stock")
		maxQty     = fs.Int64("max-qty", 2, "a purchase, and each item of a cart, asks for 1 to this many units")
		duration   = fs.Duration("duration", 3*time.Second, "length of each history")
		clients    = fs.Int("clients", 12, "concurrent clients")
		maxOps     = fs.Int("max-ops", 1500, "at most this many operations per history, so that the check stays fast")
		timeout    = fs.Duration("timeout", 15*time.Second, "timeout of one request (its outcome is then unknown)")
		checkLimit = fs.Duration("check-timeout", 60*time.Second, "longest Porcupine may search; a search cut short decides nothing and fails")
		keep       = fs.Bool("keep-unknown", false, "do not resend operations of unknown outcome after the history to learn whether they were done")
		vizDir     = fs.String("viz", "", "write Porcupine's HTML visualization of each history that is not linearizable to DIR/lincheck-MODE.html")
		check      = fs.String("check", "", "record nothing: check the history saved in this file (a failed test's out/porcupine/*.json) again")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "lincheck: "+format+"\n\n", a...)
		fs.Usage()
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return usage("unexpected arguments %v", fs.Args())
	case split(*replicas) == nil:
		return usage("-replicas: no replica URL")
	case split(*modes) == nil:
		return usage("-modes: no lock mode")
	case *check != "":
		return checkFile(*check, *checkLimit, *vizDir, stdout, stderr)
	case *duration <= 0 || *clients < 1 || *maxOps < 1 || *stock < 0 || *maxQty < 1 || *timeout <= 0:
		return usage("-duration, -timeout, -clients, -max-ops and -max-qty must be positive, -stock at least 0")
	}

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\toperations\tunknown outcomes\tfound done\tfound not done\tlinearizable\tcheck time\t")
	failed := false
	var notes []string // said after the table
	for _, mode := range split(*modes) {
		h, err := lincheck.Record(ctx, lincheck.Config{
			Replicas: split(*replicas), AdminToken: *adminToken, Mode: mode, SKUs: [2]string{*sku + "-" + mode + "-A", *sku + "-" + mode + "-B"},
			Stock: *stock, MaxQty: *maxQty, Clients: *clients, Duration: *duration, MaxOps: *maxOps, RequestTimeout: *timeout, KeepUnknown: *keep,
		})
		if err != nil {
			tw.Flush()
			fmt.Fprintf(stderr, "lincheck: %s: %v\n", mode, err)
			return 1
		}
		v := h.Check(*checkLimit)
		st := h.Stats
		verdict := map[porcupine.CheckResult]string{porcupine.Ok: "yes", porcupine.Illegal: "NO", porcupine.Unknown: "undecided"}[v.Outcome]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", mode, st.Ops, st.Unknown, st.FoundDone, st.FoundNotDone, verdict, v.CheckTime.Round(time.Millisecond))
		for _, b := range h.Broken {
			failed = true
			notes = append(notes, fmt.Sprintf("%s: a broken promise: %s", mode, b))
		}
		if st.BadRequests > 0 || st.BadAnswers > 0 {
			failed = true
			notes = append(notes, fmt.Sprintf("%s: %d requests answered 400 and %d answers without the documented fields:\n  %s",
				mode, st.BadRequests, st.BadAnswers, strings.Join(st.Problems, "\n  ")))
		}
		if v.Outcome != porcupine.Ok {
			failed = true
			what := map[porcupine.CheckResult]string{porcupine.Illegal: "not linearizable", porcupine.Unknown: "undecided within " + checkLimit.String()}[v.Outcome]
			if *vizDir != "" {
				path := filepath.Join(*vizDir, "lincheck-"+mode+".html")
				if err := v.Visualize(path); err != nil {
					notes = append(notes, err.Error())
				} else {
					what += "; visualization in " + path
				}
			}
			notes = append(notes, mode+": "+what)
		}
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "lincheck: %v\n", err)
		return 1
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "lincheck: %s\n", n)
	}
	if failed {
		return 1
	}
	return 0
}

// split is a comma-separated list without empty items; nil if there are none.
func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// checkFile checks a saved history again, with a visualization if it is not linearizable.
func checkFile(path string, limit time.Duration, vizDir string, stdout, stderr io.Writer) int {
	h, err := lincheck.ReadHistory(path)
	if err != nil {
		fmt.Fprintf(stderr, "lincheck: %v\n", err)
		return 1
	}
	v := h.Check(limit)
	fmt.Fprintf(stdout, "%s: %d operations, %s=%d and %s=%d at the start: %s in %v\n", path, len(h.Ops), h.SKUs[0], h.Stock, h.SKUs[1], h.Stock,
		map[porcupine.CheckResult]string{porcupine.Ok: "linearizable", porcupine.Illegal: "NOT linearizable", porcupine.Unknown: "undecided"}[v.Outcome],
		v.CheckTime.Round(time.Millisecond))
	for _, b := range h.Broken {
		fmt.Fprintf(stderr, "lincheck: a broken promise: %s\n", b)
	}
	if v.Outcome == porcupine.Ok && len(h.Broken) == 0 {
		return 0
	}
	if vizDir != "" {
		viz := filepath.Join(vizDir, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))+".html")
		if err := v.Visualize(viz); err != nil {
			fmt.Fprintf(stderr, "lincheck: %v\n", err)
		} else {
			fmt.Fprintf(stderr, "lincheck: visualization in %s\n", viz)
		}
	}
	return 1
}
