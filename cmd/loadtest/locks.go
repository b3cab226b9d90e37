package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/zkstock/zkstock/loadtest"
	"github.com/zkstock/zkstock/lockbench"
	"github.com/zkstock/zkstock/order"
)

// runLocks is `loadtest locks`: the lock recipes against each other on ZooKeeper, no HTTP.
func runLocks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest locks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadtest locks [flags]\n\nMeasures the lock recipes side by side, each contender in its own ZooKeeper session or Redis connection.\n\nflags:")
		fs.PrintDefaults()
	}
	servers := os.Getenv("ZK_SERVERS")
	if servers == "" {
		servers = "127.0.0.1:2181"
	}
	redisAddr := os.Getenv("REDIS_ADDR")
	if redisAddr == "" {
		redisAddr = "127.0.0.1:6379"
	}
	var (
		zkServers    = fs.String("zk-servers", servers, "comma-separated ZooKeeper servers (default $ZK_SERVERS or 127.0.0.1:2181)")
		redis        = fs.String("redis-addr", redisAddr, "Redis for the redis variant (default $REDIS_ADDR or 127.0.0.1:6379)")
		redisPass    = fs.String("redis-password", os.Getenv("REDIS_ADMIN_PASSWORD"), "password of Redis's default user, which the bench runs as: it reads INFO (default $REDIS_ADMIN_PASSWORD)")
		variants     = fs.String("variants", "spin,node-watch,herd,fair,zklock", "recipes to compare: spin, node-watch, herd, fair (dlock.Mutex), zklock (go-zookeeper), redis (go-redsync)")
		contenders   = fs.String("contenders", "1,10,50,100", "comma-separated numbers of contenders")
		acquisitions = fs.Int("acquisitions", 300, "acquisitions per recipe and contender count")
		hold         = fs.Duration("hold", 0, "time inside the critical section")
		mdOut        = fs.String("markdown", "", "also write the table as Markdown to this file")
		svgOut       = fs.String("svg", "", "also write the wake-ups chart as SVG to this file")
		zkAuth       = order.ZKAuthFlags(fs, os.Getenv, "the contenders use")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg := lockbench.Config{Servers: loadtest.SplitList(*zkServers), RedisAddr: *redis, RedisPassword: *redisPass, Variants: loadtest.SplitList(*variants),
		Acquisitions: *acquisitions, Hold: *hold, Timeout: 10 * time.Minute}
	auth, err := zkAuth()
	if err != nil {
		fmt.Fprintf(stderr, "loadtest locks: %v\n\n", err)
		fs.Usage()
		return 2
	}
	cfg.ZKUser, cfg.ZKPassword = auth.User, auth.Password
	for _, s := range loadtest.SplitList(*contenders) {
		n, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintf(stderr, "loadtest locks: -contenders: %q is not a number\n\n", s)
			fs.Usage()
			return 2
		}
		cfg.Contenders = append(cfg.Contenders, n)
	}
	if err := cfg.Validate(); err != nil || fs.NArg() > 0 {
		if err == nil {
			err = fmt.Errorf("unexpected arguments %v", fs.Args())
		}
		fmt.Fprintf(stderr, "loadtest locks: %v\n\n", err)
		fs.Usage()
		return 2
	}
	rows, err := lockbench.Run(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "loadtest locks: %v\n", err)
		return 1
	}
	if err := lockbench.WriteTable(stdout, rows); err != nil {
		fmt.Fprintf(stderr, "loadtest locks: %v\n", err)
		return 1
	}
	if err := writeOutputs(stderr, []output{
		{*mdOut, func(w io.Writer) error { return lockbench.WriteMarkdown(w, rows) }},
		{*svgOut, func(w io.Writer) error { return lockbench.WriteSVG(w, rows) }},
	}); err != nil {
		fmt.Fprintf(stderr, "loadtest locks: %v\n", err)
		return 1
	}
	return 0
}
