// Command orderd is one replica of the zkstock order service.
//
// Configuration comes from flags or the environment (see orderd -h); it logs JSON to stderr and
// shuts down gracefully on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/zkstock/zkstock/order"
)

func main() {
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
