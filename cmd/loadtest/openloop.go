package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/zkstock/zkstock/loadtest"
)

// openLoopFlags puts -rate, -duration, -sweep and -sweep-rates into cfg, and refuses the
// closed loop's flags beside them: a run has a fixed arrival rate or a fixed number in flight,
// never both.
func openLoopFlags(fs *flag.FlagSet, cfg *loadtest.Config, rate int, duration time.Duration, sweep bool, sweepRates string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg.Rate = rate
	open := rate > 0 || sweep
	switch {
	case rate < 0:
		return errors.New("-rate must not be negative")
	case sweepRates != "" && !sweep:
		return errors.New("-sweep-rates needs -sweep")
	case sweep && sweepRates == "" && rate == 0:
		return errors.New("-sweep needs the rates: -rate TOP (8 steps up to it) or -sweep-rates R1,R2,...")
	case sweep && sweepRates != "" && set["rate"]:
		return errors.New("-sweep takes -rate (the top of 8 steps) or -sweep-rates, not both")
	case !open && set["duration"]:
		return errors.New("-duration is the open loop's: give -rate too")
	case open && (set["requests"] || set["concurrency"]):
		return errors.New("-requests and -concurrency are the closed loop's: with -rate the load is -rate purchases a second for -duration")
	case !open:
		return nil
	}
	cfg.Duration = duration
	cfg.Requests, cfg.Concurrency = 0, 0
	if !sweep {
		return nil
	}
	if sweepRates == "" {
		cfg.SweepRates = loadtest.SweepSteps(rate)
	}
	for _, item := range loadtest.SplitList(sweepRates) {
		r, err := strconv.Atoi(item)
		if err != nil || r < 1 {
			return fmt.Errorf("-sweep-rates: %q is not a rate (a whole number of purchases a second, at least 1)", item)
		}
		cfg.SweepRates = append(cfg.SweepRates, r)
	}
	cfg.Rate = cfg.SweepRates[len(cfg.SweepRates)-1]
	if cfg.Duration <= 0 {
		return errors.New("-duration must be positive")
	}
	return nil
}
