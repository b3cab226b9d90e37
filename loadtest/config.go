// Package loadtest fires concurrent purchases at order-service replicas, one lock mode at a time,
// and reports side by side what each mode did to the stock. It speaks to replicas only over HTTP.
package loadtest

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Config is one comparison run.
type Config struct {
	Targets     []string      // replica base URLs; purchases go round-robin across them
	SKU         string        // product to sell
	Stock       int           // initial stock, set through the admin API before each mode
	Requests    int           // purchases per mode
	Concurrency int           // purchases in flight at once
	Qty         int           // units per purchase
	Modes       []string      // lock modes to compare, in order
	AdminToken  string        `json:"-"` // bearer token for /admin; never written to a report
	Timeout     time.Duration // per request
	CancelRatio float64       // share of accepted orders cancelled during the load, 0 to 1
	Cart        int           // 0 or 1: each purchase is one SKU; n: a cart of n distinct SKUs
	Products    int           // the catalogue: SKU, SKU-2, ... SKU-n (0 or 1: SKU alone, or the cart's)
	Dist        string        // how purchases spread over the catalogue: DistUniform or DistZipf
	ZipfS       float64       // DistZipf's exponent, above 1
	// The open loop (Rate > 0, or a sweep): purchases sent at a fixed arrival rate for Duration,
	// each answer's latency counted from its intended send time. Requests and Concurrency are the
	// closed loop's and are then zero.
	Rate       int           // purchases per second; 0: the closed loop
	Duration   time.Duration // how long each mode (each sweep step) sends
	SweepRates []int         // the offered rates a sweep steps through, per mode; empty: no sweep
}

// OpenLoop says whether purchases go at a fixed arrival rate rather than a fixed number in flight.
func (c Config) OpenLoop() bool { return c.Rate > 0 || len(c.SweepRates) > 0 }

// SKUs are the products the load sells: SKU, SKU-2, ... up to the catalogue or the cart, whichever
// is larger.
func (c Config) SKUs() []string {
	n := max(c.Products, c.Cart, 1)
	skus := make([]string, 0, n)
	skus = append(skus, c.SKU)
	for i := 2; i <= n; i++ {
		skus = append(skus, fmt.Sprintf("%s-%d", c.SKU, i))
	}
	return skus
}

// LockedModes are the modes that must keep the stock exact (under faults the unfenced ones may
// not; under the load generator's load, every one of them must).
var LockedModes = map[string]bool{"zk": true, "zk-unfenced": true, "zk-herd": true,
	"db-forupdate": true, "db-cas": true, "db-locktable": true, "zk-batch": true, "redis": true, "redis-fenced": true}

// Validate reports the first bad setting, named as its flag.
func (c Config) Validate() error {
	var errs []error
	if len(c.Targets) == 0 {
		errs = append(errs, errors.New("-targets: at least one replica URL is needed"))
	}
	for _, t := range c.Targets {
		u, err := url.Parse(t)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("-targets: %q is not an http(s) URL", t))
		}
	}
	if c.SKU == "" {
		errs = append(errs, errors.New("-sku is empty"))
	}
	if c.Stock < 0 {
		errs = append(errs, errors.New("-stock must not be negative"))
	}
	switch {
	case c.Rate < 0:
		errs = append(errs, errors.New("-rate must not be negative"))
	case c.OpenLoop():
		if c.Duration <= 0 {
			errs = append(errs, errors.New("-duration must be positive with -rate"))
		}
		for _, r := range c.SweepRates {
			if r < 1 {
				errs = append(errs, fmt.Errorf("-sweep-rates: %d is not a rate; every rate must be at least 1 per second", r))
			}
		}
	default:
		if c.Requests < 1 {
			errs = append(errs, errors.New("-requests must be at least 1"))
		}
		if c.Concurrency < 1 {
			errs = append(errs, errors.New("-concurrency must be at least 1"))
		}
	}
	if c.Qty < 1 {
		errs = append(errs, errors.New("-qty must be at least 1"))
	}
	if c.CancelRatio < 0 || c.CancelRatio > 1 || c.CancelRatio != c.CancelRatio {
		errs = append(errs, errors.New("-cancel-ratio must be from 0 to 1"))
	}
	if c.Cart < 0 || c.Cart > 20 {
		errs = append(errs, errors.New("-cart must be from 0 to 20 (a cart holds at most 20 SKUs)"))
	}
	if c.Products < 0 || c.Products > 100000 { // 0: the default, SKU alone
		errs = append(errs, errors.New("-skus must be from 1 to 100000"))
	}
	if c.Dist != "" && c.Dist != DistUniform && c.Dist != DistZipf {
		errs = append(errs, fmt.Errorf("-dist must be %s or %s", DistUniform, DistZipf))
	}
	if c.Dist == DistZipf && !(c.ZipfS > 1) {
		errs = append(errs, errors.New("-zipf-s must be above 1"))
	}
	if len(c.Modes) == 0 {
		errs = append(errs, errors.New("-modes: name at least one lock mode"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("-timeout must be positive"))
	}
	return errors.Join(errs...)
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, strings.TrimRight(p, "/"))
		}
	}
	return out
}
