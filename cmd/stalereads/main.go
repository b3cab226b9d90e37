// Command stalereads shows the stale reads a Galera cluster allows: it writes a product's stock
// through the first of the nodes and, right after each write returns, reads it through the second,
// first with Galera's default wsrep_sync_wait=0, then with the 1 zkstock's sessions use, and says
// how many reads missed the write just made (tutorial 12).
//
//	stalereads [-dsn DSN] [-nodes HOST:PORT,HOST:PORT[,...]] -sku SKU [-n 2000]
//
// The DSN and the nodes are orderd's MYSQL_DSN and MYSQL_NODES (their defaults): the DSN's user
// reached at each node's address. The product must exist; its stock is left at n. The exit
// status is 2 on bad usage, 1 when the cluster fails it.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/internal/galeraprobe"
	"github.com/zkstock/zkstock/order"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stalereads", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The DSN holds a password: its flag's default stays empty, so that a usage message never
	// prints it; MYSQL_DSN is read after the flags.
	dsn := fs.String("dsn", "", "the database user's DSN, as orderd's MYSQL_DSN (default $MYSQL_DSN, which keeps the password off the command line)")
	nodes := fs.String("nodes", getenv("MYSQL_NODES"), "the cluster's nodes, host:port comma-separated, as orderd's MYSQL_NODES: writes go to the first, reads to the second (default $MYSQL_NODES)")
	sku := fs.String("sku", "", "the product whose stock is written (it must exist)")
	n := fs.Int("n", 2000, "writes, each followed by a read, per setting")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: stalereads [-dsn DSN] [-nodes HOST:PORT,HOST:PORT[,...]] -sku SKU [-n 2000]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dsn == "" {
		*dsn = getenv("MYSQL_DSN")
	}
	list := strings.Split(*nodes, ",")
	switch {
	case fs.NArg() > 0:
		return usage(fs, stderr, fmt.Sprintf("unexpected arguments: %v", fs.Args()))
	case *dsn == "":
		return usage(fs, stderr, "no DSN: set -dsn or MYSQL_DSN")
	case len(list) < 2 || list[0] == "" || list[1] == "":
		return usage(fs, stderr, "-nodes (or MYSQL_NODES) must list at least two nodes, host:port")
	case *sku == "":
		return usage(fs, stderr, "-sku is required")
	case *n < 1:
		return usage(fs, stderr, "-n must be at least 1")
	}
	dsns, err := order.NodeDSNs(*dsn, list[:2])
	if err != nil {
		return usage(fs, stderr, fmt.Sprintf("-dsn: %v", err))
	}
	writer, err := sql.Open("mysql", dsns[0])
	if err != nil {
		return fail(stderr, err)
	}
	defer writer.Close()
	fmt.Fprintf(stdout, "reads through %s right after a write through %s:\n", list[1], list[0])
	for _, wait := range []string{"0", "1"} {
		reader, err := openWithSyncWait(dsns[1], wait)
		if err != nil {
			return fail(stderr, err)
		}
		r, err := galeraprobe.StaleReads(ctx, writer, reader, *sku, *n)
		if cerr := reader.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fail(stderr, err)
		}
		line := fmt.Sprintf("wsrep_sync_wait=%s: %d of %d stale", wait, r.Stale, r.Reads)
		if r.Stale > 0 {
			line += fmt.Sprintf(" (%.1f%%), up to %d writes behind", 100*float64(r.Stale)/float64(r.Reads), r.Behind)
		}
		fmt.Fprintln(stdout, line)
	}
	return 0
}

// openWithSyncWait is a pool on dsn whose sessions set wsrep_sync_wait to v.
func openWithSyncWait(dsn, v string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse the DSN: %w", err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["wsrep_sync_wait"] = v
	return sql.Open("mysql", cfg.FormatDSN())
}

func usage(fs *flag.FlagSet, stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "stalereads: %s\n", msg)
	fs.Usage()
	return 2
}

func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "stalereads: %v\n", err)
	return 1
}
