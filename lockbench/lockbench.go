// Package lockbench measures the lock recipes side by side: dlock's fair Mutex, the teaching
// variants (spin, node-watch, herd), go-zookeeper's zk.Lock, and the Redis lock (go-redsync), each
// with n contenders in n separate sessions or connections. It talks to ZooKeeper and Redis only.
package lockbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/teaching"
)

// Variants are the recipes this package knows, in the order reports show them.
var Variants = []string{"spin", "node-watch", "herd", "fair", "zklock", "redis"}

// Config is one comparison.
type Config struct {
	Servers   []string
	RedisAddr string // for the redis variant
	// RedisPassword is the password of Redis's default user, which the bench runs as (it counts
	// the server's commands with INFO); empty: a Redis without one.
	RedisPassword string
	Variants      []string
	Contenders    []int
	Acquisitions  int           // per variant and contender count
	Hold          time.Duration // time inside the critical section
	Timeout       time.Duration // for the whole of one row
	// ZKUser and ZKPassword, when set, are the digest identity every ZooKeeper contender
	// authenticates as; their nodes then get dlock.DigestACL. Needed under a path whose ACL
	// admits only that identity (zkstock's /zkstock).
	ZKUser, ZKPassword string
}

// Row is one variant at one contender count.
type Row struct {
	Variant       string  `json:"variant"`
	Contenders    int     `json:"contenders"`
	Acquisitions  int     `json:"acquisitions"`
	AcqPerSec     float64 `json:"acq_per_sec"`
	OpsPerAcq     float64 `json:"zk_ops_per_acq"`  // -1: not counted (zk.Lock)
	WakeupsPerAcq float64 `json:"wakeups_per_acq"` // -1: not counted (zk.Lock)
	WaitP50       float64 `json:"wait_p50_ms"`
	WaitP99       float64 `json:"wait_p99_ms"`
	Displacement  float64 `json:"mean_displacement"`  // how far acquisition order strays from request order
	WaitMax       float64 `json:"wait_max_ms"`        // the longest any contender waited
	RedisCmdsAcq  float64 `json:"redis_cmds_per_acq"` // -1: not Redis
}

// Validate names the first bad setting as its flag.
func (c Config) Validate() error {
	var errs []error
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("-zk-servers: no ZooKeeper servers given"))
	}
	for _, v := range c.Variants {
		if !contains(Variants, v) {
			errs = append(errs, fmt.Errorf("-variants: unknown variant %q (want some of %s)", v, strings.Join(Variants, ", ")))
		}
	}
	if len(c.Variants) == 0 {
		errs = append(errs, errors.New("-variants: name at least one"))
	}
	if contains(c.Variants, "redis") && c.RedisAddr == "" {
		errs = append(errs, errors.New("-redis-addr: the redis variant needs a Redis"))
	}
	if len(c.Contenders) == 0 {
		errs = append(errs, errors.New("-contenders: name at least one count"))
	}
	for _, n := range c.Contenders {
		if n < 1 || n > 1000 {
			errs = append(errs, fmt.Errorf("-contenders: %d is not from 1 to 1000", n))
		}
	}
	if c.Acquisitions < 1 {
		errs = append(errs, errors.New("-acquisitions must be at least 1"))
	}
	return errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// contender is one session's way to take and release the lock.
type contender struct {
	lock  func(ctx context.Context) (release func() error, err error)
	stats func() dlock.Stats // nil for zk.Lock
	close func()
}

func newContender(ctx context.Context, variant string, cfg Config, path string) (*contender, error) {
	servers := cfg.Servers
	if variant == "redis" {
		return newRedisContender(cfg.RedisAddr, cfg.RedisPassword, path), nil
	}
	if variant == "zklock" {
		conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
		if err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		acl := zk.WorldACL(zk.PermAll)
		if cfg.ZKUser != "" {
			if err := conn.AddAuth("digest", []byte(cfg.ZKUser+":"+cfg.ZKPassword)); err != nil {
				conn.Close()
				return nil, fmt.Errorf("digest auth: %w", err)
			}
			acl = dlock.DigestACL(cfg.ZKUser, cfg.ZKPassword)
		}
		l := zk.NewLock(conn, path, acl)
		return &contender{
			lock: func(context.Context) (func() error, error) {
				if err := l.Lock(); err != nil {
					return nil, err
				}
				return l.Unlock, nil
			},
			close: conn.Close,
		}, nil
	}
	if variant == "fair" {
		var opts []dlock.Option
		if cfg.ZKUser != "" {
			opts = append(opts, dlock.WithDigest(cfg.ZKUser, cfg.ZKPassword))
		}
		c, err := dlock.Connect(ctx, servers, opts...)
		if err != nil {
			return nil, err
		}
		return &contender{lock: leaseLock(dlock.NewMutex(c, path).Lock), stats: c.Stats, close: func() { _ = c.Close() }}, nil
	}
	var opts []teaching.Option
	if cfg.ZKUser != "" {
		opts = append(opts, teaching.WithDigest(cfg.ZKUser, cfg.ZKPassword))
	}
	c, err := teaching.Connect(ctx, servers, 10*time.Second, "lockbench", opts...)
	if err != nil {
		return nil, err
	}
	var l teaching.Locker
	switch variant {
	case "spin":
		l = teaching.NewSpinLock(c, path, 10*time.Millisecond)
	case "node-watch":
		l = teaching.NewNodeWatchLock(c, path)
	default:
		l = teaching.NewHerdLock(c, path)
	}
	return &contender{lock: leaseLock(l.Lock), stats: c.Stats, close: func() { _ = c.Close() }}, nil
}

// leaseLock adapts a recipe whose Lock returns a lease to a contender's lock.
func leaseLock[L interface{ Unlock(context.Context) error }](lock func(context.Context) (L, error)) func(context.Context) (func() error, error) {
	return func(ctx context.Context) (func() error, error) {
		lease, err := lock(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return lease.Unlock(context.WithoutCancel(ctx)) }, nil
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// Run measures every variant at every contender count.
func Run(ctx context.Context, cfg Config, progress io.Writer) ([]Row, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	var rows []Row
	for _, n := range cfg.Contenders {
		for _, v := range cfg.Variants {
			row, err := runOne(ctx, cfg, v, n)
			if err != nil {
				return rows, fmt.Errorf("%s with %d contenders: %w", v, n, err)
			}
			if progress != nil {
				fmt.Fprintf(progress, "%-10s %4d contenders: %7.0f acq/s\n", v, n, row.AcqPerSec)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func runOne(ctx context.Context, cfg Config, variant string, n int) (Row, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	path := fmt.Sprintf("/zkstock/bench/%s-%d-%d", variant, n, time.Now().UnixNano())
	cs := make([]*contender, n)
	var cerr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range cs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := newContender(ctx, variant, cfg, path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				cerr = err
				return
			}
			cs[i] = c
		}(i)
	}
	wg.Wait()
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.close()
			}
		}
	}()
	if cerr != nil {
		return Row{}, cerr
	}

	var redisBefore int64
	if variant == "redis" {
		var err error
		if redisBefore, err = redisCommands(ctx, cfg.RedisAddr, cfg.RedisPassword); err != nil {
			return Row{}, err
		}
	}
	var issued, requests, acquired atomic.Int64
	var displacement atomic.Int64
	hist := hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
	var firstErr error
	start := time.Now()
	for _, c := range cs {
		wg.Add(1)
		go func(c *contender) {
			defer wg.Done()
			for issued.Add(1) <= int64(cfg.Acquisitions) {
				req := requests.Add(1)
				t0 := time.Now()
				release, err := c.lock(ctx)
				if err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
					return
				}
				got := acquired.Add(1)
				wait := time.Since(t0)
				d := got - req
				if d < 0 {
					d = -d
				}
				displacement.Add(d)
				mu.Lock()
				_ = hist.RecordValue(max(1, wait.Microseconds()))
				mu.Unlock()
				if cfg.Hold > 0 {
					time.Sleep(cfg.Hold)
				}
				if err := release(); err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
					return
				}
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return Row{}, firstErr
	}
	total := acquired.Load()
	row := Row{Variant: variant, Contenders: n, Acquisitions: int(total), AcqPerSec: float64(total) / elapsed.Seconds(),
		OpsPerAcq: -1, WakeupsPerAcq: -1, RedisCmdsAcq: -1,
		WaitP50: float64(hist.ValueAtQuantile(50)) / 1000, WaitP99: float64(hist.ValueAtQuantile(99)) / 1000,
		WaitMax: float64(hist.Max()) / 1000, Displacement: float64(displacement.Load()) / float64(total)}
	if variant == "redis" {
		after, err := redisCommands(ctx, cfg.RedisAddr, cfg.RedisPassword)
		if err != nil {
			return Row{}, err
		}
		row.RedisCmdsAcq = float64(after-redisBefore) / float64(total)
	}
	if cs[0].stats != nil {
		var s dlock.Stats
		for _, c := range cs {
			s = s.Add(c.stats())
		}
		row.OpsPerAcq = float64(s.Ops()) / float64(total)
		row.WakeupsPerAcq = float64(s.WatchEvents) / float64(total)
	}
	return row, nil
}

var header = []string{"variant", "contenders", "acq/s", "ZK ops/acq", "wake-ups/acq", "wait p50 ms", "wait p99 ms", "displacement",
	"wait max ms", "Redis cmds/acq"}

func (r Row) cells() []string {
	f := func(v float64) string {
		if v < 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", v)
	}
	return []string{r.Variant, fmt.Sprint(r.Contenders), fmt.Sprintf("%.0f", r.AcqPerSec), f(r.OpsPerAcq), f(r.WakeupsPerAcq),
		fmt.Sprintf("%.1f", r.WaitP50), fmt.Sprintf("%.1f", r.WaitP99), fmt.Sprintf("%.2f", r.Displacement),
		fmt.Sprintf("%.1f", r.WaitMax), f(r.RedisCmdsAcq)}
}

// WriteTable prints the rows aligned.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(), "\t")+"\t")
	}
	return tw.Flush()
}

// WriteMarkdown prints the rows as a Markdown table.
func WriteMarkdown(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n| --- |" + strings.Repeat(" ---: |", len(header)-1) + "\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r.cells(), " | ") + " |\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
