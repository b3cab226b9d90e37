// Package scalebench measures how the service scales with the catalogue: purchases per second and
// latency against the number of SKUs (uniform and Zipf) for several lock modes, next to the raw
// limits of the same ZooKeeper and database measured in the same run, and names the limit that
// binds each cell. It drives the replicas over HTTP (loadtest), ZooKeeper directly (lockbench)
// and the database directly (inventory), and nothing else.
package scalebench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/loadtest"
	"github.com/zkstock/zkstock/lockbench"
)

// Config is one run against one set of servers.
type Config struct {
	Label       string   // the ZooKeeper setup, for the report: "standalone", "3-node ensemble"
	Targets     []string // the replicas
	AdminToken  string
	ZKServers   []string
	MySQLDSN    string
	SKUCounts   []int
	Dists       []string
	ZipfS       float64
	Modes       []string
	Requests    int // per cell
	Concurrency int
	RawFor      time.Duration // how long each raw limit is measured
}

// Limits are the raw ceilings of the servers, in the same run.
type Limits struct {
	ZooKeeperPairs float64 `json:"zk_create_delete_per_s"` // ephemeral sequential create+delete pairs per second
	DBCommits      float64 `json:"db_commits_per_s"`       // single-row conditional UPDATE commits per second
	Sessions       int     `json:"zk_sessions"`
	Connections    int     `json:"db_connections"`
}

// Cell is one mode on one catalogue.
type Cell struct {
	Setup         string  `json:"setup"`
	Mode          string  `json:"mode"`
	SKUs          int     `json:"skus"`
	Dist          string  `json:"dist"`
	Throughput    float64 `json:"purchases_per_s"`
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	Exact         bool    `json:"exact"`
	ZKOpsPerSale  float64 `json:"zk_ops_per_purchase"`
	SalesPerLock  float64 `json:"purchases_per_acquisition"` // zk-batch sells many under one lock
	ZKCeiling     float64 `json:"zk_ceiling_per_s"`          // 0 where ZooKeeper is not used
	DBCeiling     float64 `json:"db_ceiling_per_s"`
	Binding       string  `json:"binding"`
	BindingRatio  float64 `json:"binding_ratio"`
	Errors        int     `json:"errors"`
	ErrorExamples string  `json:"error_codes,omitempty"`
	CPU           *CPU    `json:"cpu,omitempty"` // nil where /proc cannot be read
}

// Result is a run.
type Result struct {
	Setup  string `json:"setup"`
	Limits Limits `json:"limits"`
	Cells  []Cell `json:"cells"`
}

// Run measures the raw limits, then every cell.
func Run(ctx context.Context, cfg Config, progress func(string)) (Result, error) {
	res := Result{Setup: cfg.Label, Limits: Limits{Sessions: len(cfg.Targets), Connections: cfg.Concurrency}}
	var err error
	path := fmt.Sprintf("/zkstock-rawbench-%d", time.Now().UnixNano())
	progress("raw ZooKeeper: create+delete of ephemeral sequential nodes")
	if res.Limits.ZooKeeperPairs, err = lockbench.RawZooKeeper(ctx, cfg.ZKServers, len(cfg.Targets), max(1, cfg.Concurrency/len(cfg.Targets)), path, cfg.RawFor); err != nil {
		return res, err
	}
	progress("raw database: single-row conditional UPDATE commits")
	store, err := inventory.Open(ctx, cfg.MySQLDSN, inventory.PoolOptions{MaxOpen: cfg.Concurrency})
	if err != nil {
		return res, err
	}
	defer store.Close()
	if res.Limits.DBCommits, err = store.RawUpdates(ctx, cfg.Concurrency, 1000, cfg.RawFor); err != nil {
		return res, err
	}
	if _, err := sampleCPU(); err != nil {
		progress(fmt.Sprintf("the CPU is not measured: %v", err))
	}
	for _, skus := range cfg.SKUCounts {
		for _, dist := range cfg.Dists {
			if skus == 1 && dist != cfg.Dists[0] {
				continue // one product: every distribution is the same
			}
			for _, mode := range cfg.Modes {
				progress(fmt.Sprintf("%s: %s over %d SKUs (%s)", cfg.Label, mode, skus, dist))
				cell, err := runCell(ctx, cfg, res.Limits, mode, skus, dist)
				if err != nil {
					return res, fmt.Errorf("%s over %d SKUs (%s): %w", mode, skus, dist, err)
				}
				res.Cells = append(res.Cells, cell)
			}
		}
	}
	return res, nil
}

func runCell(ctx context.Context, cfg Config, lim Limits, mode string, skus int, dist string) (Cell, error) {
	before, err := zkOps(ctx, cfg.Targets)
	if err != nil {
		return Cell{}, err
	}
	meter := &cpuMeter{}
	rep, err := loadtest.Run(ctx, loadtest.Config{Targets: cfg.Targets, AdminToken: cfg.AdminToken, SKU: fmt.Sprintf("SC%d%c", skus, dist[0]),
		Products: skus, Dist: dist, ZipfS: cfg.ZipfS, Stock: cfg.Requests, Requests: cfg.Requests, Concurrency: cfg.Concurrency,
		Qty: 1, Modes: []string{mode}, Timeout: time.Minute}, meter)
	if err != nil {
		return Cell{}, err
	}
	after, err := zkOps(ctx, cfg.Targets)
	if err != nil {
		return Cell{}, err
	}
	row := rep.Rows[0]
	c := Cell{Setup: cfg.Label, Mode: mode, SKUs: skus, Dist: dist, Throughput: row.Throughput, P50ms: row.P50, P99ms: row.P99,
		Exact: rep.Check() == nil, Errors: row.Errors}
	for code, n := range row.ErrorCodes {
		c.ErrorExamples += fmt.Sprintf("%s×%d ", code, n)
	}
	sold := float64(row.Accepted)
	if meter.err == nil {
		cpu := cpuBetween(meter.start, meter.end, runtime.NumCPU(), sold)
		c.CPU = &cpu
	}
	locks := after[acquisitions] - before[acquisitions]
	var ops float64
	for op, n := range after {
		if op != acquisitions {
			ops += n - before[op]
		}
	}
	c.SalesPerLock = 1
	if sold > 0 && ops > 0 {
		c.ZKOpsPerSale = ops / sold
		if locks > 0 {
			c.SalesPerLock = sold / locks
		}
	}
	c.bind(lim, ops > 0)
	return c, nil
}

// bind names the limit that binds the cell. Every lock acquisition creates and deletes one node
// and commits one transaction, so the ceilings in purchases per second are the raw rates times the
// purchases sold per acquisition (more than one in zk-batch); the lower one binds.
func (c *Cell) bind(lim Limits, usesZooKeeper bool) {
	c.ZKCeiling = 0
	c.DBCeiling = lim.DBCommits * c.SalesPerLock
	c.Binding, c.BindingRatio = "database", c.Throughput/c.DBCeiling
	if usesZooKeeper {
		c.ZKCeiling = lim.ZooKeeperPairs * c.SalesPerLock
		if c.ZKCeiling < c.DBCeiling {
			c.Binding, c.BindingRatio = "ZooKeeper", c.Throughput/c.ZKCeiling
		}
	}
}

// acquisitions is zkOps's key for the locks taken.
const acquisitions = "acquisitions"

// zkOps adds up the replicas' ZooKeeper operations by kind (zkstock_zk_ops_total), and the locks
// they took (zkstock_zk_acquisitions_total).
func zkOps(ctx context.Context, targets []string) (map[string]float64, error) {
	total := map[string]float64{}
	for _, t := range targets {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, t+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", t, err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			var op, val string
			if rest, ok := strings.CutPrefix(line, `zkstock_zk_ops_total{op="`); ok {
				if op, val, ok = strings.Cut(rest, `"} `); !ok {
					continue
				}
			} else if rest, ok := strings.CutPrefix(line, "zkstock_zk_acquisitions_total "); ok {
				op, val = acquisitions, rest
			} else {
				continue
			}
			v, err := strconv.ParseFloat(val, 64)
			if err != nil {
				resp.Body.Close()
				return nil, fmt.Errorf("metrics of %s: %q: %w", t, line, err)
			}
			total[op] += v
		}
		err = sc.Err()
		resp.Body.Close()
		if err != nil {
			return nil, errors.Join(fmt.Errorf("metrics of %s", t), err)
		}
	}
	return total, nil
}

// cpuMeter samples the CPU when the load starts and when it ends, so that setting up the
// products and auditing them are not charged to the purchases.
type cpuMeter struct {
	start, end cpuSample
	err        error
}

func (m *cpuMeter) Start(string, int) { m.start, m.err = sampleCPU() }
func (m *cpuMeter) Add(int)           {}
func (m *cpuMeter) Finish() {
	if m.err == nil {
		m.end, m.err = sampleCPU()
	}
}
