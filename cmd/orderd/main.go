// Command orderd is one replica of the zkstock order service.
//
// Configuration comes from flags or the environment (see orderd -h); it logs JSON to stderr and
// shuts down gracefully on SIGTERM or SIGINT.
//
// `orderd probe [URL]` asks a running replica's /readyz (default http://127.0.0.1:8080/readyz) and
// exits 0 when it is ready: the container health check, in an image that has no curl.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/zkstock/zkstock/order"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "probe" {
		os.Exit(probe(os.Args[2:]))
	}
	cfg, err := order.LoadConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "orderd: %v\nrun 'orderd -h' for the flags and variables\n", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := order.Run(ctx, cfg, log); err != nil {
		log.Error("orderd failed", "err", err)
		os.Exit(1)
	}
}

func probe(args []string) int {
	url := "http://127.0.0.1:8080/readyz"
	if len(args) > 0 {
		url = args[0]
	}
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Fprintf(os.Stderr, "orderd probe: %v\n", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(os.Stderr, "orderd probe: %s answered %s\n", url, resp.Status)
		return 1
	}
	return 0
}
