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
	// ServersOnly, when set, charges the CPU of a ZooKeeper, database or replica process to its
	// kind only when its command line holds one of these strings (the servers' directories, the
	// replicas' binary): on a machine that runs other servers too, theirs go to "other".
	ServersOnly []string
}

// Limits are the raw ceilings of the servers, in the same run.
type Limits struct {
	ZooKeeperPairs float64 `json:"zk_create_delete_per_s"` // ephemeral sequential create+delete pairs per second
	DBCommits      float64 `json:"db_commits_per_s"`       // single-row conditional UPDATE commits per second
	Sessions       int     `json:"zk_sessions"`
	Connections    int     `json:"db_connections"`
	// The servers' own CPU per unit of raw work, measured in the same phases: ZooKeeper's per
	// operation (a create or a delete), the database's per statement (an autocommitted UPDATE).
	// A cell's floor is its operations and statements at these prices (Cell.FloorMs).
	ZKCPUPerOpMs        float64 `json:"zk_cpu_ms_per_op,omitempty"`
	DBCPUPerStatementMs float64 `json:"db_cpu_ms_per_statement,omitempty"`
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
	// Statements per purchase the database counted (SHOW GLOBAL STATUS): Questions (all), and
	// Com_select, Com_update, Com_insert, Com_begin, Com_commit, Com_rollback.
	Statements map[string]float64 `json:"statements_per_purchase,omitempty"`
	// FloorMs is the CPU the servers need for the cell's work at the raw phases' prices: ZooKeeper
	// ops per purchase × ZooKeeper CPU per raw op, plus statements per purchase × database CPU
	// per raw statement. The cell's CPU per purchase (replicas, ZooKeeper, database) over it is
	// the overhead to watch.
	FloorMs float64 `json:"floor_cpu_ms_per_purchase,omitempty"`
}

// statusNames are the database counters a cell reads before and after its load.
var statusNames = []string{"Questions", "Com_select", "Com_update", "Com_insert", "Com_begin", "Com_commit", "Com_rollback"}

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
	cpu0, cpuErr := sampleCPU(cfg.ServersOnly)
	if cpuErr != nil {
		progress(fmt.Sprintf("the CPU is not measured: %v", cpuErr))
	}
	if res.Limits.ZooKeeperPairs, err = lockbench.RawZooKeeper(ctx, cfg.ZKServers, len(cfg.Targets), max(1, cfg.Concurrency/len(cfg.Targets)), path, cfg.RawFor); err != nil {
		return res, err
	}
	if cpu1, err := sampleCPU(cfg.ServersOnly); err == nil && cpuErr == nil {
		if ops := 2 * res.Limits.ZooKeeperPairs * cpu1.at.Sub(cpu0.at).Seconds(); ops > 0 {
			res.Limits.ZKCPUPerOpMs = cpuBetween(cpu0, cpu1, runtime.NumCPU(), ops).MsPerPurchase["ZooKeeper"]
		}
	}
	progress("raw database: single-row conditional UPDATE commits")
	store, err := inventory.Open(ctx, cfg.MySQLDSN, inventory.PoolOptions{MaxOpen: cfg.Concurrency})
	if err != nil {
		return res, err
	}
	defer store.Close()
	st0, stErr := store.GlobalStatus(ctx, statusNames...)
	cpu0, cpuErr = sampleCPU(cfg.ServersOnly)
	if res.Limits.DBCommits, err = store.RawUpdates(ctx, cfg.Concurrency, 1000, cfg.RawFor); err != nil {
		return res, err
	}
	cpu1, cpuErr1 := sampleCPU(cfg.ServersOnly)
	if st1, err := store.GlobalStatus(ctx, statusNames...); err == nil && stErr == nil && cpuErr == nil && cpuErr1 == nil {
		// The whole phase: the scratch table's set-up is a few hundred statements against the
		// phase's thousands.
		if n := st1["Questions"] - st0["Questions"]; n > 0 {
			res.Limits.DBCPUPerStatementMs = cpuBetween(cpu0, cpu1, runtime.NumCPU(), n).MsPerPurchase["database"]
		}
	}
	for _, skus := range cfg.SKUCounts {
		for _, dist := range cfg.Dists {
			if skus == 1 && dist != cfg.Dists[0] {
				continue // one product: every distribution is the same
			}
			for _, mode := range cfg.Modes {
				progress(fmt.Sprintf("%s: %s over %d SKUs (%s)", cfg.Label, mode, skus, dist))
				cell, err := runCell(ctx, cfg, store, res.Limits, mode, skus, dist)
				if err != nil {
					return res, fmt.Errorf("%s over %d SKUs (%s): %w", mode, skus, dist, err)
				}
				res.Cells = append(res.Cells, cell)
			}
		}
	}
	return res, nil
}

func runCell(ctx context.Context, cfg Config, store *inventory.Store, lim Limits, mode string, skus int, dist string) (Cell, error) {
	before, err := zkOps(ctx, cfg.Targets)
	if err != nil {
		return Cell{}, err
	}
	meter := &cpuMeter{only: cfg.ServersOnly, store: store}
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
	if meter.statusErr == nil && sold > 0 {
		c.Statements = map[string]float64{}
		for _, name := range statusNames {
			c.Statements[name] = (meter.status1[name] - meter.status0[name]) / sold
		}
	}
	locks := after[acquisitions] - before[acquisitions]
	var ops float64
	for op, n := range after {
		if op != acquisitions {
			ops += n - before[op]
		}
	}
	if sold > 0 && ops > 0 {
		c.ZKOpsPerSale = ops / sold
	}
	c.SalesPerLock = salesPerLock(c.Mode, sold, locks)
	c.bind(lim, locksWithZooKeeper(c.Mode))
	if c.Statements != nil && lim.DBCPUPerStatementMs > 0 {
		c.FloorMs = c.ZKOpsPerSale*lim.ZKCPUPerOpMs + c.Statements["Questions"]*lim.DBCPUPerStatementMs
	}
	return c, nil
}

// locksWithZooKeeper says whether a lock mode's lock is ZooKeeper's (every such mode's name starts
// with "zk"). It is the mode, not the ZooKeeper acquisitions counted in its cell, that decides:
// a switch of the fleet's mode at a cell's start has every replica take its hold of the fleet's
// barrier again, so a db-forupdate cell counts a few ZooKeeper acquisitions, and its purchases
// per lock would come out in the hundreds.
func locksWithZooKeeper(mode string) bool { return strings.HasPrefix(mode, "zk") }

// salesPerLock is the purchases a cell sold per ZooKeeper lock it took: 1 unless the mode's lock
// is ZooKeeper's and it took some.
func salesPerLock(mode string, sold, locks float64) float64 {
	if !locksWithZooKeeper(mode) || sold <= 0 || locks <= 0 {
		return 1
	}
	return sold / locks
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
// It reads the database's statement counters at the same moments.
type cpuMeter struct {
	only       []string
	start, end cpuSample
	err        error

	store            *inventory.Store
	status0, status1 map[string]float64
	statusErr        error
}

func (m *cpuMeter) Start(string, int) {
	m.status0, m.statusErr = m.store.GlobalStatus(context.Background(), statusNames...)
	m.start, m.err = sampleCPU(m.only)
}
func (m *cpuMeter) Add(int) {}
func (m *cpuMeter) Finish() {
	if m.err == nil {
		m.end, m.err = sampleCPU(m.only)
	}
	if m.statusErr == nil {
		m.status1, m.statusErr = m.store.GlobalStatus(context.Background(), statusNames...)
	}
}
