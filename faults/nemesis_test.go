package faults

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/internal/nemesis"
	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/lincheck"
)

// The nemesis: faults composed at random while clients on every replica buy, buy carts, cancel
// and read, every history checked with Porcupine and every SKU audited at the end. It runs only
// when asked (make nemesis, make test-nemesis), with:
//
//	NEMESIS_MODE      lock modes, comma-separated, one run each (zk)
//	NEMESIS_SEED      seeds, one per mode or one for all (1)
//	NEMESIS_DURATION  how long faults start, per run (60s)
//	NEMESIS_FAULTS    fault kinds, comma-separated (all)
//	NEMESIS_DB        the database under the fleet: mariadb (one server, the default) or galera
//	                  (the three-node cluster of scripts/servers.sh --galera: each replica reaches
//	                  each node through a proxy of its own, with MYSQL_NODES listing them; the
//	                  galera-* kinds act on the nodes, db-restart and block-commits are left out)
//	NEMESIS_GALERA_SPREAD  1: on Galera, each replica writes to a node of its own (replica i lists
//	                  the nodes from node i on) instead of all to node 1
//
// NEMESIS_DURATION and NEMESIS_FAULTS may name values per mode: "none=15s;*=50s",
// "redis=pause-at-commit,redis-restart;*=" (empty: all kinds).
//	NEMESIS_OUT       where runs are written (../out/nemesis), one directory per mode and seed
//	NEMESIS_LOG_LEVEL the replicas' LOG_LEVEL (warn; info logs every purchase)
//	NEMESIS_EPOCH     how long one history lasts (2m): a long run records one per epoch, each on
//	                  SKUs of its own, so that each stays fast to check
//	NEMESIS_STOCK     each SKU's stock at the start of its history (200); per mode as above: a
//	                  small stock sells out, and cancellations restock it, within a short run
//
// A mode may carry a lie planted in the replicas (zk+unconfirmed-not-sold: internal/nemesis
// SplitLie, order's planted.go), which makes it a negative control.
//
// A run in a safe mode passes with no anomaly; a run in an unsafe mode (a negative control:
// none, zk-unfenced, redis, db-locktable) passes only if it caught the mode (a history not
// linearizable, units oversold or lost) within controlTries schedules.

const (
	nemesisSession  = 4 * time.Second
	nemesisReplicas = 3
	nemesisPairs    = 2 // histories of two SKUs each, checked apart: the model's unit is a pair
	nemesisClients  = 5 // per pair, round-robin over the replicas
	// The clients retry as people write them (lincheck.Config.Retries): up to three times under a
	// change's key, on the next replica; two of each pair's five give up after 2.5 s, inside the
	// replicas' LOCK_TIMEOUT of 5 s and past the 2 s within which an attempt holds its key or
	// makes nothing, and one sends without a pause.
	nemesisRetries   = 3
	nemesisImpatient = 0.4
	nemesisGiveUp    = 2500 * time.Millisecond
	nemesisEager     = 0.2
)

// waitKeysAnswered waits, at most d, until no replica holds a key for a change not yet answered
// (zkstock_keys_held): the changes impatient clients gave up on are over.
func (f *fleetUnderFire) waitKeysAnswered(d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		busy := false
		for _, r := range f.rs {
			resp, err := httpc.Get(r.url + "/metrics")
			if err != nil {
				continue // a replica down holds nothing that can still commit but its COMMITs in flight
			}
			raw, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			for _, l := range strings.Split(string(raw), "\n") {
				if v, ok := strings.CutPrefix(l, "zkstock_keys_held "); ok && strings.TrimSpace(v) != "0" {
					busy = true
				}
			}
		}
		if !busy {
			return
		}
	}
	f.note("a replica still held keys %v after every fault was healed", d)
}

func TestNemesis(t *testing.T) {
	if os.Getenv("NEMESIS") != "1" {
		t.Skip("the nemesis runs with make nemesis (NEMESIS=1)")
	}
	modes := strings.Split(envOr("NEMESIS_MODE", "zk"), ",")
	var seeds []uint64
	for _, s := range strings.Split(envOr("NEMESIS_SEED", "1"), ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			t.Fatalf("NEMESIS_SEED %q: %v", s, err)
		}
		seeds = append(seeds, n)
	}
	// CI shows only the output's tail, where the runs' own reasons are long gone: the test ends
	// with each failed run's reasons.
	recap := &recap{}
	defer func() {
		if t.Failed() {
			t.Logf("why the nemesis failed:\n%s", recap)
		}
	}()
	ens := nemesisEnsembles
	defer ens.close()
	for i, mode := range modes {
		mode = strings.TrimSpace(mode)
		seed := seeds[min(i, len(seeds)-1)]
		dur, err := time.ParseDuration(nemesis.PerMode(mode, envOr("NEMESIS_DURATION", "60s")))
		if err != nil {
			t.Fatalf("NEMESIS_DURATION for %s: %v", mode, err)
		}
		spec := nemesis.PerMode(mode, os.Getenv("NEMESIS_FAULTS"))
		kinds, err := nemesis.ParseKinds(spec)
		if err != nil {
			t.Fatal(err)
		}
		db := envOr("NEMESIS_DB", nemesis.DBSingle)
		if kinds, err = nemesis.CheckDB(db, spec, kinds); err != nil {
			t.Fatal(err)
		}
		if db == nemesis.DBGalera && os.Getenv("GALERA_DIR") == "" {
			// Not a skip: a nemesis asked for and not run must not pass.
			t.Fatal("NEMESIS_DB=galera needs the Galera cluster: make nemesis DB=galera, or scripts/servers.sh run --galera")
		}
		t.Run(fmt.Sprintf("%s-%d", mode, seed), func(t *testing.T) {
			name := t.Name() // unique, where a mode and seed run twice are not
			defer func() {
				if t.Failed() && !recap.has(name) {
					recap.add(name, "stopped early; its log says why")
				}
			}()
			lockMode, lie := nemesis.SplitLie(mode)
			stock, err := strconv.ParseInt(nemesis.PerMode(mode, envOr("NEMESIS_STOCK", "200")), 10, 64)
			if err != nil || stock < 1 {
				t.Fatalf("NEMESIS_STOCK for %s: %q", mode, nemesis.PerMode(mode, envOr("NEMESIS_STOCK", "200")))
			}
			run := nemesisRun{db: db, mode: lockMode, lie: lie, seed: seed, duration: dur, kinds: kinds, spec: spec, stock: stock, recap: recap, name: name,
				ensembles: ens, more: i < len(modes)-1}
			if !nemesis.IsControl(mode) {
				run.lastTry = true
				runNemesis(t, run)
				return
			}
			// Each try of a control is a subtest of its own, so that its replicas, ensemble and
			// proxies are gone (its cleanups) before the next one starts.
			for try := 1; ; try++ {
				run.lastTry = try == controlTries
				caught := true
				ok := t.Run(fmt.Sprintf("seed-%d", run.seed), func(t *testing.T) { caught = runNemesis(t, run) })
				if caught || run.lastTry || !ok {
					break
				}
				run.seed++
			}
		})
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// controlTries is how many schedules a negative control is given, its seed and the ones after
// it: a control whose bug the faults of one schedule happened not to trigger (a paused COMMIT no
// other replica raced) is run on the next, and it fails only when none of them catches it.
const controlTries = 3

type nemesisRun struct {
	lastTry  bool   // a control not caught fails the run, instead of giving way to the next seed
	db       string // the database under the fleet: nemesis.DBSingle or DBGalera
	mode     string // the lock mode
	lie      string // the lie planted in the replicas (order's ZKSTOCK_LIE), if any
	stock    int64  // each SKU's stock at the start of its history
	seed     uint64
	duration time.Duration
	kinds    []nemesis.Kind
	spec     string
	name     string
	recap    *recap
	// ensembles gives the run its ZooKeeper ensemble; more: another mode's run follows it, whose
	// ensemble is started as this one takes its own (a control's next try in the last mode starts
	// its own: most are not needed).
	ensembles *ensembles
	more      bool
}

// ensembles hands each run an ensemble of its own, fresh (nemesisEnsemble), and starts the next
// run's in the background (prestart) as the run before it starts: its start, 1.5 s on 2 shared
// cores, 11 s to 24 s when the first two peers' election retries back off (about one in five),
// overlaps that run instead of delaying the next. Its JVMs start as the replicas do, before the
// faults; only a third peer held back by such an election starts during them.
type ensembles struct {
	mu   sync.Mutex
	next chan startedEnsemble // the ensemble being started; nil if none
}

// nemesisEnsembles are the nemesis's; TestMain starts the first run's as it builds orderd.
var nemesisEnsembles = &ensembles{}

type startedEnsemble struct {
	e          *testenv.ProxiedEnsemble
	err        error
	start, end time.Time // of NewProxiedEnsemble
}

// prestart starts the next run's ensemble, unless one is being started already.
func (s *ensembles) prestart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next != nil {
		return
	}
	ch := make(chan startedEnsemble, 1)
	go func() {
		start := time.Now()
		e, err := testenv.NewProxiedEnsemble(nemesisEnsemble)
		ch <- startedEnsemble{e, err, start, time.Now()}
	}()
	s.next = ch
}

// take is the ensemble prestart started, or one started now, stopped when t ends; no other run
// has used it.
func (s *ensembles) take(t *testing.T) *testenv.ProxiedEnsemble {
	t.Helper()
	s.prestart()
	s.mu.Lock()
	ch := s.next
	s.next = nil
	s.mu.Unlock()
	asked := time.Now()
	r := <-ch
	if r.err != nil {
		t.Fatalf("the run's ZooKeeper ensemble: %v", r.err)
	}
	t.Logf("ZooKeeper ensemble started in %.1fs, %.1fs of it waited for", r.end.Sub(r.start).Seconds(), time.Since(asked).Seconds())
	t.Cleanup(func() {
		if err := r.e.Close(); err != nil {
			t.Error(err)
		}
	})
	return r.e
}

// close stops an ensemble started for a run that did not come (a control caught early).
func (s *ensembles) close() {
	s.mu.Lock()
	ch := s.next
	s.next = nil
	s.mu.Unlock()
	if ch == nil {
		return
	}
	if r := <-ch; r.e != nil {
		_ = r.e.Close()
	}
}

// recap is what failed runs, in the order they failed.
type recap struct {
	mu    sync.Mutex
	lines []string
}

func (r *recap) add(run, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, run+": "+why)
}

func (r *recap) has(run string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.lines, func(l string) bool { return strings.HasPrefix(l, run+": ") })
}

func (r *recap) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return "  " + strings.Join(r.lines, "\n  ")
}

// The ensemble's timing is the shared ensemble's (scripts/servers.sh): a follower cut off from
// its leader serves its clients for syncLimit × tickTime = 5 s, past the replicas' 4 s sessions.
var nemesisEnsemble = testenv.EnsembleTiming{Tick: 500 * time.Millisecond, InitLimit: 20, SyncLimit: 10,
	MinSession: time.Second, MaxSession: time.Minute}

// followerTimeout is how long a follower cut off from its leader goes on serving.
var followerTimeout = time.Duration(nemesisEnsemble.SyncLimit) * nemesisEnsemble.Tick

// links are a replica's proxies: one per ZooKeeper peer, one per database node (the one server,
// or each Galera node in node order), Redis.
type links struct {
	zk, db []*tcpproxy.Proxy
	redis  *tcpproxy.Proxy
}

func (l *links) all() []*tcpproxy.Proxy {
	return append(append(slices.Clone(l.zk), l.db...), l.redis)
}

// fleetUnderFire is one run's replicas, servers and what happened to them.
type fleetUnderFire struct {
	t     *testing.T
	rs    []*replica
	links []*links
	dsn   string   // the run's database as its admin (on Galera: at node 1)
	nodes []string // on Galera, the run's database as its admin at each node, in node order; nil on one server
	// spread: on Galera, each replica writes to a node of its own (replica i lists the nodes from
	// node i on), not all to node 1 (NEMESIS_GALERA_SPREAD=1, and the stale-reads control)
	spread bool
	// writer is the Galera node (1 to 3) the fleet wrote to as the next Galera fault was prepared,
	// 0 if none carried its traffic; carried, whether each node carried any of it then.
	writer  int
	carried []bool
	ens     *testenv.ProxiedEnsemble
	run     nemesisRun

	mu       sync.Mutex
	windows  []nemesis.Window
	switches sync.WaitGroup
	switchOn bool
	skipped  map[nemesis.Kind]int
	done     map[nemesis.Kind]int
	effect   map[nemesis.Kind]int // of done, those that took effect (tookEffect)
	notes    []string
}

// label is the run's mode as NEMESIS_MODE names it: the lock mode, and "+lie" when one is planted.
func (r nemesisRun) label() string {
	if r.lie == "" {
		return r.mode
	}
	return r.mode + "+" + r.lie
}

// runNemesis runs one schedule and judges it. It reports false only for a control that was not
// caught on a try that is not its last (which it logs instead of failing); true otherwise.
func runNemesis(t *testing.T, run nemesisRun) bool {
	wallStart := time.Now()
	name := fmt.Sprintf("%s-%d", run.label(), run.seed)
	if run.db == nemesis.DBGalera {
		name = "galera-" + name
	}
	outDir := filepath.Join(envOr("NEMESIS_OUT", filepath.Join("..", "out", "nemesis")), name)
	if err := os.RemoveAll(outDir); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(outDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAULTS_LOG_DIR", logDir)

	// Each run gets an ensemble of its own, its peers reaching one another through proxies so that
	// a follower can be cut off from its leader: which peer leads, and which election links went
	// direct, are then the run's own, and a seed replays on a fresh one (run.ensembles started it
	// during the run before, and no run used it before this one).
	f := &fleetUnderFire{t: t, run: run, skipped: map[nemesis.Kind]int{}, done: map[nemesis.Kind]int{}, effect: map[nemesis.Kind]int{}}
	if run.db == nemesis.DBGalera {
		// One database per run on the cluster, as on the one server; a node a run left down
		// (a failed restart) would fail every later one, so the cluster must be whole first.
		if out, err := testenv.GaleraRun(t, "wait-synced", "60"); err != nil {
			t.Fatalf("the Galera cluster is not whole before the run: %v", err)
		} else {
			t.Logf("Galera: %s", out)
		}
		f.nodes = testenv.GaleraDatabase(t)
		f.dsn = f.nodes[0]
		f.spread = run.lie == staleReadsLie || os.Getenv("NEMESIS_GALERA_SPREAD") == "1"
		if run.lie == unsafeFlushLie {
			f.setFlush(0)
			t.Cleanup(func() { f.setFlush(1) }) // the cluster outlives the run: the next one is safe
		}
	} else {
		f.dsn = testenv.MySQLDatabase(t)
		if run.lie == unsafeFlushLie || run.lie == staleReadsLie {
			t.Fatalf("the lie %s is a control of Galera's: run it with NEMESIS_DB=galera (make nemesis DB=galera)", run.lie)
		}
	}
	f.ens = run.ensembles.take(t)
	if run.more {
		run.ensembles.prestart()
	}
	redisAddr := testenv.RedisAddr(t)
	settings := []string{"LOCK_MODE=" + run.mode, "ZK_SESSION_TIMEOUT=" + nemesisSession.String(), "WORK_DELAY=20ms",
		"LOCK_TIMEOUT=5s", "REDIS_LOCK_TTL=3s", "LOG_LEVEL=" + envOr("NEMESIS_LOG_LEVEL", "warn"),
		// The checker looks up every refusal and every change answered done by its key after each
		// history, all from loopback: one client to the replicas' limits, which must not leave a
		// promise unchecked (lincheck counts a 429 as a look-up not answered).
		"KEY_LOOKUP_RATE=1000000", "KEY_LOOKUP_BURST=1000000", "CANCEL_RATE=1000000", "CANCEL_BURST=1000000"}
	// No tree to delete at the end: the fleet's nodes go with the run's ensemble.
	for i := range nemesisReplicas {
		l := &links{redis: tcpproxy.NewRaw(t, redisAddr)}
		var zkAddrs []string
		for _, peer := range f.ens.Addrs {
			p := tcpproxy.New(t, peer)
			l.zk = append(l.zk, p)
			zkAddrs = append(zkAddrs, p.Addr())
		}
		name := fmt.Sprintf("order%d", i+1)
		var r *replica
		if f.nodes == nil {
			p, dsn := tcpproxy.ProxiedDSN(t, f.dsn, nil)
			l.db = []*tcpproxy.Proxy{p}
			r = newReplica(t, name, dsn, zkAddrs, append(settings, "REDIS_ADDR="+l.redis.Addr())...)
		} else {
			// Each node through a proxy of the replica's own, node 1's in MYSQL_DSN: the
			// replica's cluster reaches each node at its proxy (MYSQL_NODES), so that a cut or
			// a stall at a COMMIT acts on whichever node carries it.
			// With the writers spread (galeraSpread), replica i lists the nodes from node i on,
			// so that its cluster writes there: each node is some replica's writer.
			first := 0
			if f.spread {
				first = i % len(f.nodes)
			}
			var dsn string
			dsns := make([]string, len(f.nodes))
			for n, node := range f.nodes {
				p, d := tcpproxy.ProxiedDSN(t, node, nil)
				l.db, dsns[n] = append(l.db, p), d
			}
			var addrs []string
			for k := range f.nodes {
				addrs = append(addrs, l.db[(first+k)%len(f.nodes)].Addr())
			}
			dsn = dsns[first]
			service := testenv.AsUser(t, dsn, testenv.GaleraServiceDSNs(t)[0])
			if run.lie == staleReadsLie {
				service = testenv.WithDSNParam(t, service, "wsrep_sync_wait", "0")
			}
			r = newReplicaAs(t, name, dsn, service, zkAddrs, append(settings, "REDIS_ADDR="+l.redis.Addr(), "MYSQL_NODES="+strings.Join(addrs, ","))...)
		}
		if run.lie != "" {
			r.bin = orderdLiesBin
			r.env = append(r.env, "ZKSTOCK_LIE="+run.lie)
		}
		r.start()
		f.rs, f.links = append(f.rs, r), append(f.links, l)
	}
	for _, r := range f.rs {
		r.waitReady(60 * time.Second)
	}

	// The workload: histories of two SKUs each, their clients round-robin over every replica.
	var obsMu sync.Mutex
	var ops []nemesis.Op
	observe := func(o lincheck.Observation) {
		obsMu.Lock()
		ops = append(ops, nemesis.Op{Start: o.Start, End: o.End, Class: nemesis.PointClass(o), What: fmt.Sprintf("%s %s (%s)", o.Kind, o.Answer, o.Key)})
		obsMu.Unlock()
	}
	var urls []string
	for _, r := range f.rs {
		urls = append(urls, r.url)
	}
	// A long run records a history per epoch, on SKUs of its own, so that no history grows past
	// what Porcupine checks fast: an operation of unknown outcome found done may take effect
	// anywhere after its call, up to its history's end. The SKUs of an ended epoch are left alone,
	// then audited with the others at the end.
	var recMu sync.Mutex
	var recs []*lincheck.Recorder
	var skus []string
	startEpoch := func(e int, giveUp <-chan struct{}) error {
		for p := range nemesisPairs {
			pair := [2]string{fmt.Sprintf("N%d-%d-A", e, p+1), fmt.Sprintf("N%d-%d-B", e, p+1)}
			for attempt := 0; ; attempt++ {
				// Reset through the next replica each time: one may be down.
				order := append(slices.Clone(urls[attempt%len(urls):]), urls[:attempt%len(urls)]...)
				rec, err := lincheck.Start(context.Background(), lincheck.Config{Replicas: order, AdminToken: "faults",
					SKUs: pair, Stock: run.stock, MaxQty: 2, Clients: nemesisClients, Pause: 20 * time.Millisecond, MaxOps: 1 << 30,
					RequestTimeout: 30 * time.Second, Seed: run.seed<<8 | uint64(e)<<4 | uint64(p), ResolveByKey: true, Observe: observe,
					Retries: nemesisRetries, Impatient: nemesisImpatient, GiveUpAfter: nemesisGiveUp, Eager: nemesisEager})
				if err == nil {
					recMu.Lock()
					recs, skus = append(recs, rec), append(skus, pair[0], pair[1])
					recMu.Unlock()
					break
				}
				select {
				case <-giveUp:
					return fmt.Errorf("start the history of %v: %w", pair, err)
				case <-time.After(time.Second):
				}
			}
		}
		return nil
	}
	if err := startEpoch(1, nil); err != nil {
		t.Fatal(err)
	}
	epoch, err := time.ParseDuration(envOr("NEMESIS_EPOCH", "2m"))
	if err != nil {
		t.Fatalf("NEMESIS_EPOCH: %v", err)
	}

	// The faults, as the seed schedules them; what is still on at the end is healed.
	t0 := time.Now()
	endEpochs, epochsDone := make(chan struct{}), make(chan struct{})
	// Stopped on every way out: a run ended by a t.Fatal must not leave its epochs running into
	// the next run.
	stopEpochs := sync.OnceFunc(func() { close(endEpochs); <-epochsDone })
	defer stopEpochs()
	go func() {
		defer close(epochsDone)
		// No epoch starts in a run's last 20 s: too short a history to be worth its SKUs.
		for e := 2; time.Duration(e-1)*epoch+20*time.Second < run.duration; e++ {
			select {
			case <-time.After(time.Until(t0.Add(time.Duration(e-1) * epoch))):
			case <-endEpochs:
				return
			}
			recMu.Lock()
			old := slices.Clone(recs)
			recMu.Unlock()
			if err := startEpoch(e, endEpochs); err != nil {
				f.note("epoch %d: %v", e, err)
				return
			}
			for _, rec := range old {
				go rec.Halt() // it waits for the operations in flight; Stop resolves them at the end
			}
		}
	}()
	schedule := nemesis.Schedule(nemesis.Plan{Seed: run.seed, Duration: run.duration, Kinds: run.kinds,
		Replicas: nemesisReplicas, Mode: run.mode, Session: nemesisSession})
	type on struct {
		f     nemesis.Fault
		start time.Time
		what  string
		heal  func()
	}
	var active []on
	// A run that ends early (a t.Fatal on the way) still heals what it broke: the proxies and
	// the servers outlive it.
	defer func() {
		for _, a := range active {
			a.heal()
		}
	}()
	healOne := func(i int) {
		a := active[i]
		a.heal()
		f.window(a.f.Kind, a.start, time.Now(), a.what)
		active = slices.Delete(active, i, i+1)
	}
	// healDue heals, in the order they end, the faults that end before until.
	healDue := func(until time.Time) {
		for {
			first := -1
			for i, a := range active {
				if first < 0 || a.start.Add(a.f.Hold).Before(active[first].start.Add(active[first].f.Hold)) {
					first = i
				}
			}
			if first < 0 || !active[first].start.Add(active[first].f.Hold).Before(until) {
				return
			}
			time.Sleep(time.Until(active[first].start.Add(active[first].f.Hold)))
			healOne(first)
		}
	}
	for _, fault := range schedule {
		healDue(t0.Add(fault.At))
		time.Sleep(time.Until(t0.Add(fault.At)))
		// The schedule keeps one resource's faults apart in its own time; a run behind it (a
		// fault on the ensemble waits up to 15 s for it to be whole; stopping a server, blocking
		// commits and a pause at a COMMIT take seconds too) would start the next on a resource
		// before the last is healed, and kill a replica already killed (zk seed 601 at length
		// stopped so: "signal killed to order2: process already finished"). The next waits
		// for those it contends with to end, as drawn.
		var contended time.Time
		for _, a := range active {
			if nemesis.Contend(a.f, fault) {
				contended = later(contended, a.start.Add(a.f.Hold))
			}
		}
		if !contended.IsZero() {
			healDue(contended.Add(time.Nanosecond))
		}
		f.prepare(fault)
		start := time.Now()
		what, heal := f.inject(fault)
		if heal == nil {
			continue
		}
		t.Logf("%6.1fs %s", time.Since(t0).Seconds(), what)
		active = append(active, on{f: fault, start: start, what: what, heal: heal})
	}
	healDue(t0.Add(run.duration))
	time.Sleep(time.Until(t0.Add(run.duration)))
	for len(active) > 0 { // what is still on at the end
		healOne(0)
	}
	f.switches.Wait()
	stopEpochs()
	healedAt := time.Now()
	if !f.ensembleWhole(60 * time.Second) {
		f.note("the ZooKeeper ensemble was not whole 60 s after every fault was healed")
		f.fail("the ZooKeeper ensemble was not whole 60 s after every fault was healed: %v", f.ens.Addrs)
	}
	// The audits read through the replicas' writers, with causal reads: each must be a Synced
	// member of the primary component, which the cluster is once every node is Synced again.
	if f.nodes != nil {
		if out, err := testenv.GaleraRun(t, "wait-synced", "60"); err != nil {
			f.note("the Galera cluster was not Synced 60 s after every fault was healed: %v", err)
			f.fail("the Galera cluster was not Synced 60 s after every fault was healed: %v", err)
		} else {
			t.Logf("Galera after the faults: %s", out)
		}
		if st, err := testenv.GaleraRun(t, "status"); err == nil {
			t.Logf("Galera status:\n%s", st)
		}
	}

	// Every replica must come back on its own: ready, and reading every SKU.
	sum := nemesis.Summary{Seed: run.seed, Mode: run.label(), DB: run.db, DurationS: run.duration.Seconds(), Faults: f.done, TookEffect: f.effect, Skipped: f.skipped,
		Anomalies: map[string]int{}, Control: nemesis.IsControl(run.label()), Answers: map[string]int{}, Schedule: schedule}
	for _, k := range nemesis.Anomalies {
		sum.Anomalies[k] = 0
	}
	recovered := f.waitRecovered(60 * time.Second)
	for _, rec := range recs {
		rec.Halt()
	}
	// Every change a live replica still runs (its client gave up on it) is answered, its key
	// released; what a healed proxy or a woken replica still had in flight lands within moments
	// more; after that a key not found was never sold.
	f.waitKeysAnswered(60 * time.Second)
	time.Sleep(3 * time.Second)
	for i, r := range f.rs {
		for _, sku := range skus {
			if !recovered[i] {
				break
			}
			if st, m := call("GET", r.url+"/v1/products/"+sku, ""); st != 200 {
				recovered[i] = false
				f.note("%s cannot read %s after every fault was healed: %d %v", r.name, sku, st, m)
			}
		}
		if !recovered[i] {
			sum.Anomalies[nemesis.NeverRecovered]++
		}
	}
	t.Logf("healed after %.1fs; recovered %v in %.1fs", healedAt.Sub(t0).Seconds(), recovered, time.Since(healedAt).Seconds())

	// The histories, each checked on its own, and the audit of every SKU.
	for p, rec := range recs {
		h, err := rec.Stop()
		if err != nil {
			f.fail("history %d: %v", p+1, err)
		}
		st := h.Stats
		sum.Ops += st.Ops
		sum.Unknown += st.Unknown
		sum.Resolved += st.FoundDone + st.FoundNotDone
		sum.Refused += st.Refused
		sum.Retried += st.Retried
		sum.Anomalies[nemesis.WrongAnswers] += st.BadRequests + st.BadAnswers
		sum.Anomalies[nemesis.BrokenPromises] += st.BrokenPromises
		for i, b := range h.Broken {
			if i == 5 {
				f.note("history %d: %d more broken promises", p+1, len(h.Broken)-i)
				break
			}
			f.note("history %d: a broken promise: %s", p+1, b)
		}
		if st.RefusalsUnchecked > 0 {
			f.note("history %d: %d of %d refusals could not be looked up", p+1, st.RefusalsUnchecked, st.Refused)
		}
		if st.DoneUnchecked > 0 {
			f.note("history %d: %d changes answered done could not be looked up", p+1, st.DoneUnchecked)
		}
		if st.BadRequests+st.BadAnswers > 0 {
			f.note("history %d: %d requests answered 400, %d answers without the documented fields: %s", p+1, st.BadRequests, st.BadAnswers, strings.Join(st.Problems, " | "))
		}
		for k, v := range st.Answers {
			sum.Answers[k] += v
		}
		v := h.Check(max(2*time.Minute, run.duration))
		sum.Histories = append(sum.Histories, nemesis.HistoryRun{SKUs: h.SKUs, Ops: st.Ops, Unknown: st.Unknown, Outcome: outcomeName(v.Outcome), CheckTime: v.CheckTime.Seconds()})
		switch v.Outcome {
		case porcupine.Ok:
			if len(h.Broken) == 0 {
				continue
			}
		case porcupine.Illegal:
			sum.Anomalies[nemesis.NonLinearizable]++
		default:
			sum.Anomalies[nemesis.Undecided]++
		}
		base := filepath.Join(outDir, fmt.Sprintf("history-%d", p+1))
		if err := h.WriteFile(base + ".json"); err != nil {
			f.fail("save history %d: %v", p+1, err)
		}
		if err := v.Visualize(base + ".html"); err != nil {
			f.fail("visualize history %d: %v", p+1, err)
		}
		sum.Files = append(sum.Files, base+".json", base+".html")
	}
	for _, sku := range skus {
		a, err := f.audit(sku)
		if err != nil {
			f.fail("audit %s: %v", sku, err)
			continue
		}
		sum.Audits = append(sum.Audits, a)
		sum.Anomalies[nemesis.Oversold] += int(a.Oversold)
		sum.Anomalies[nemesis.LostUpdates] += int(a.LostUpdates) // both ways, summed (inventory.Audit)
	}
	sum.Linearizable = sum.Anomalies[nemesis.NonLinearizable]+sum.Anomalies[nemesis.Undecided] == 0
	sum.WallS = time.Since(wallStart).Seconds()
	sum.Build = buildCommit()
	sum.Reproduce = fmt.Sprintf("make nemesis MODE=%s SEED=%d DURATION=%s", run.label(), run.seed, run.duration)
	if run.spec != "" {
		sum.Reproduce += " FAULTS=" + run.spec
	}
	if run.stock != 200 {
		sum.Reproduce += fmt.Sprintf(" STOCK=%d", run.stock)
	}
	if run.db != nemesis.DBSingle {
		sum.Reproduce += " DB=" + run.db
	}
	if f.spread && run.lie != staleReadsLie {
		sum.Reproduce = "NEMESIS_GALERA_SPREAD=1 " + sum.Reproduce
	}
	switch {
	case sum.Build == "" || strings.HasSuffix(sum.Build, "+dirty"):
		f.note("the build is not a commit (%q): the seed replays its schedule only on this tree", sum.Build)
	default:
		sum.Reproduce = fmt.Sprintf("git checkout %s && %s", sum.Build, sum.Reproduce)
	}
	sum.Notes = f.notes
	sum.Judge()

	obsMu.Lock()
	sum.Requests = len(ops)
	svg := nemesis.Timeline(&sum, t0, ops, f.windows)
	obsMu.Unlock()
	if err := os.WriteFile(filepath.Join(outDir, "timeline.svg"), []byte(svg), 0o644); err != nil {
		f.fail("%v", err)
	}
	if err := sum.Write(outDir); err != nil {
		f.fail("%v", err)
	}
	abs, _ := filepath.Abs(outDir)
	t.Logf("%s on %s seed %d: %d ops (%d unknown, %d refused), faults %v, took effect %v, anomalies %v, linearizable %v, wall %.0fs; %s",
		run.label(), run.db, run.seed, sum.Ops, sum.Unknown, sum.Refused, sum.Faults, sum.TookEffect, sum.Anomalies, sum.Linearizable, sum.WallS, abs)
	switch {
	case sum.Control && !sum.Caught && t.Failed():
		return true // failed already, for what it logged: no next schedule
	case sum.Control && !sum.Caught && !run.lastTry:
		t.Logf("the negative control %s was not caught with seed %d; it runs again with seed %d; %s", run.label(), run.seed, run.seed+1, abs)
		return false
	case sum.Control && !sum.Caught:
		f.fail("the negative control %s was not caught (seed %d, the last of %d schedules): the nemesis proves nothing with these schedules; %s", run.label(), run.seed, controlTries, abs)
	case !sum.Passed:
		f.fail("%s seed %d: anomalies %v; reproduce with %s; the histories and their visualizations in %s", run.label(), run.seed, sum.Anomalies, sum.Reproduce, abs)
	}
	return true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// buildCommit is the checkout's commit, "+dirty" when it has changes, or "" outside git.
func buildCommit() string {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err != nil || len(bytes.TrimSpace(st)) > 0 {
		commit += "+dirty" // or not known to be clean
	}
	return commit
}

func outcomeName(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "Ok"
	case porcupine.Illegal:
		return "Illegal"
	}
	return "Unknown"
}

// fail fails the run and says why in the test's recap too.
func (f *fleetUnderFire) fail(format string, args ...any) {
	f.t.Helper()
	f.run.recap.add(f.run.name, fmt.Sprintf(format, args...))
	f.t.Errorf(format, args...)
}

func (f *fleetUnderFire) note(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notes = append(f.notes, fmt.Sprintf(format, args...))
	f.t.Logf(format, args...)
}

// tookEffect counts a fault that took effect: it met what it was for (a COMMIT paused, traffic
// cut or slowed, a follower out of the quorum, a switch made), or, for a process killed, stopped
// or restarted, it was made.
func (f *fleetUnderFire) tookEffect(k nemesis.Kind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.effect[k]++
}

func (f *fleetUnderFire) window(k nemesis.Kind, from, to time.Time, what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.windows = append(f.windows, nemesis.Window{Kind: k, Start: from, End: to, What: what})
}

// inject starts a fault; heal, nil if the fault could not be started, stops it.
func (f *fleetUnderFire) inject(fault nemesis.Fault) (what string, heal func()) {
	t := f.t
	var r *replica
	var l *links
	if fault.Replica >= 0 {
		r, l = f.rs[fault.Replica], f.links[fault.Replica]
	}
	count := func() {
		f.mu.Lock()
		f.done[fault.Kind]++
		f.mu.Unlock()
	}
	skip := func(why string) (string, func()) {
		f.mu.Lock()
		f.skipped[fault.Kind]++
		f.mu.Unlock()
		f.note("%s skipped: %s", fault, why)
		return "", nil
	}
	traffic := trafficOf
	// stall cuts the links ps; it took effect if it held back any traffic.
	stall := func(ps ...*tcpproxy.Proxy) func() {
		_, before := traffic(ps)
		for _, p := range ps {
			p.Stall()
		}
		return func() {
			if _, after := traffic(ps); after > before {
				f.tookEffect(fault.Kind)
			}
			for _, p := range ps {
				p.Resume()
			}
		}
	}
	// immediate faults (a process killed, stopped or restarted) take effect as they are made.
	immediate := func(what string, heal func()) (string, func()) {
		f.tookEffect(fault.Kind)
		return what, heal
	}
	defer func() {
		if heal != nil {
			count()
		}
	}()
	switch fault.Kind {
	case nemesis.Kill:
		r.kill9()
		return immediate(fmt.Sprintf("kill -9 %s, started again after %.1fs", r.name, fault.Hold.Seconds()), func() { r.start() })
	case nemesis.Pause:
		r.signal(syscall.SIGSTOP)
		return immediate(fmt.Sprintf("SIGSTOP %s for %.1fs (session %v)", r.name, fault.Hold.Seconds(), nemesisSession), func() { r.signal(syscall.SIGCONT) })
	case nemesis.PauseAtCommit:
		armed := time.Now()
		stop, stopped := make(chan struct{}), make(chan struct{})
		fired := firstCommit(l.db, stop, func(p *tcpproxy.Proxy, match func(string) bool) <-chan struct{} { return p.StallAtQuery(match) })
		proc := r.cmd.Process
		var pausedAt time.Time // written before stopped closes, read after
		go func() {
			defer close(stopped)
			select {
			case <-fired:
				_ = proc.Signal(syscall.SIGSTOP)
				pausedAt = time.Now()
				f.t.Logf("%s stopped at its COMMIT, %.1fs into the fault", r.name, time.Since(armed).Seconds())
			case <-stop:
				f.note("%s sent no COMMIT in the window: not paused", r.name)
			}
		}()
		return fmt.Sprintf("SIGSTOP %s at its next COMMIT, for %.1fs (session %v)", r.name, fault.Hold.Seconds(), nemesisSession), func() {
			close(stop)
			<-stopped
			// A COMMIT that came late still gets its whole pause, or it proves nothing.
			if !pausedAt.IsZero() {
				time.Sleep(time.Until(pausedAt.Add(fault.Hold)))
				f.tookEffect(fault.Kind)
			}
			_ = proc.Signal(syscall.SIGCONT)
			for _, p := range l.db {
				p.Disarm()
				p.Resume()
			}
		}
	case nemesis.LoseCommitReply:
		fired := make(chan struct{})
		var once sync.Once
		var won atomic.Bool // one COMMIT, on whichever link carries it first
		for _, p := range l.db {
			p.CutAfterQuery(func(q string) bool {
				if !strings.EqualFold(q, "COMMIT") || !won.CompareAndSwap(false, true) {
					return false
				}
				once.Do(func() { close(fired) })
				return true
			}, false)
		}
		return fmt.Sprintf("%s's next COMMIT applied and its reply lost, armed for %.1fs", r.name, fault.Hold.Seconds()), func() {
			for _, p := range l.db {
				p.Disarm()
			}
			select {
			case <-fired:
				f.tookEffect(fault.Kind)
			default:
				f.note("%s sent no COMMIT in the window: no reply lost", r.name)
			}
		}
	case nemesis.CutZK:
		return fmt.Sprintf("%s cut off from ZooKeeper for %.1fs", r.name, fault.Hold.Seconds()), stall(l.zk...)
	case nemesis.CutDB:
		return fmt.Sprintf("%s cut off from the database for %.1fs", r.name, fault.Hold.Seconds()), stall(l.db...)
	case nemesis.CutRedis:
		return fmt.Sprintf("%s cut off from Redis for %.1fs", r.name, fault.Hold.Seconds()), stall(l.redis)
	case nemesis.Isolate:
		return fmt.Sprintf("%s cut off from everything for %.1fs", r.name, fault.Hold.Seconds()), stall(l.all()...)
	case nemesis.Slow:
		before, _ := traffic(l.all())
		for _, p := range l.all() {
			p.SetDelay(fault.Delay)
		}
		return fmt.Sprintf("%s's links slowed by %v each way for %.1fs", r.name, fault.Delay, fault.Hold.Seconds()), func() {
			if after, _ := traffic(l.all()); after > before {
				f.tookEffect(fault.Kind) // traffic went through the slow links
			}
			for _, p := range l.all() {
				p.SetDelay(0)
			}
		}
	case nemesis.ZKLeader:
		if !f.ens.Whole() {
			return skip("the ensemble is not whole")
		}
		leader := testenv.ZKLeader(f.ens.Addrs)
		if leader < 0 {
			return skip("no leader in the ensemble")
		}
		dir := f.ens.Dirs[leader]
		if err := syscall.Kill(pidOf(t, dir), syscall.SIGKILL); err != nil {
			return skip(err.Error())
		}
		return immediate(fmt.Sprintf("ZooKeeper leader (peer %d) killed, started again after %.1fs", leader+1, fault.Hold.Seconds()), func() { testenv.ServersScript(t, "start-server", dir) })
	case nemesis.FollowerCut:
		if !f.ens.Whole() {
			return skip("the ensemble is not whole")
		}
		leader := testenv.ZKLeader(f.ens.Addrs)
		var followers []int
		for i, a := range f.ens.Addrs {
			if i != leader && testenv.ZKMode(a) == "follower" {
				followers = append(followers, i)
			}
		}
		if leader < 0 || len(followers) != 2 {
			return skip("the ensemble changed as it was looked at")
		}
		peer := followers[fault.Follower]
		resume := f.ens.CutOff(peer, leader)
		cutAt := time.Now()
		return fmt.Sprintf("ZooKeeper follower (peer %d) cut off from its leader (peer %d) for %.1fs", peer+1, leader+1, fault.Hold.Seconds()), func() {
			// Past syncLimit × tickTime the follower must have left the quorum, or the cut
			// did not cut. The time is the cut's own: the run's end heals what is still on,
			// however long it was meant to hold (CI's seed 383 cut a follower 3 s before its end).
			cut := time.Since(cutAt)
			mode := testenv.ZKMode(f.ens.Addrs[peer])
			switch {
			case mode != "follower":
				f.tookEffect(fault.Kind) // it left the quorum
			case cut > followerTimeout+time.Second:
				f.note("peer %d still a follower %.1fs into its cut (syncLimit × tickTime %v): the cut did not cut", peer+1, cut.Seconds(), followerTimeout)
				f.fail("peer %d still a follower %.1fs into its cut from the leader: the nemesis's cut does not cut", peer+1, cut.Seconds())
			}
			resume()
		}
	case nemesis.DBRestart, nemesis.BlockCommits:
		if f.nodes != nil {
			return skip("a single-server kind, and the run is on Galera") // CheckDB leaves it out before
		}
	}
	switch fault.Kind {
	case nemesis.DBRestart:
		dir := os.Getenv("MYSQL_DIR")
		testenv.ServersScript(t, "stop-server", dir)
		return immediate(fmt.Sprintf("MariaDB stopped for %.1fs", fault.Hold.Seconds()), func() { testenv.ServersScript(t, "start-server", dir) })
	case nemesis.BlockCommits:
		cfg, err := mysql.ParseDSN(f.dsn)
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return skip(err.Error())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := db.Conn(ctx)
		if err == nil {
			_, err = conn.ExecContext(ctx, "BACKUP STAGE START")
		}
		if err == nil {
			_, err = conn.ExecContext(ctx, "BACKUP STAGE BLOCK_COMMIT")
		}
		if err != nil {
			db.Close()
			return skip(fmt.Sprintf("BACKUP STAGE: %v", err))
		}
		// It took effect if a COMMIT waited behind it: the server shows one waiting for the lock.
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				var waiting int
				err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE LIKE 'Waiting for backup lock%'").Scan(&waiting)
				if err == nil && waiting > 0 {
					f.tookEffect(fault.Kind)
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		return fmt.Sprintf("commits blocked (BACKUP STAGE BLOCK_COMMIT) for %.1fs", fault.Hold.Seconds()), func() {
			close(stop)
			<-stopped
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := conn.ExecContext(ctx, "BACKUP STAGE END"); err != nil {
				f.note("BACKUP STAGE END: %v (the connection's close ends the stage)", err)
			}
			conn.Close()
			db.Close()
		}
	case nemesis.RedisRestart:
		dir := os.Getenv("REDIS_DIR")
		testenv.ServersScript(t, "stop-server", dir)
		return immediate(fmt.Sprintf("Redis stopped for %.1fs (restarted empty)", fault.Hold.Seconds()), func() { testenv.ServersScript(t, "start-server", dir) })
	case nemesis.GaleraKill, nemesis.GaleraIsolate, nemesis.GaleraPause, nemesis.GaleraLag, nemesis.GaleraPowerFail:
		return f.injectGalera(fault, skip)
	case nemesis.Switch:
		f.mu.Lock()
		busy := f.switchOn
		f.switchOn = true
		f.mu.Unlock()
		if busy {
			return skip("the previous switch is still waiting for the fleet")
		}
		start := time.Now()
		f.switches.Add(1)
		go func() {
			defer f.switches.Done()
			st, m := call("PUT", r.url+"/admin/lock-mode", fmt.Sprintf(`{"mode":%q}`, fault.Mode), "Authorization", "Bearer faults")
			code, _ := m["code"].(string)
			f.window(nemesis.Switch, start, time.Now(), fmt.Sprintf("switch to %s through %s: %d %s", fault.Mode, r.name, st, code))
			if st == http.StatusOK {
				f.tookEffect(nemesis.Switch) // the fleet switched
			}
			f.mu.Lock()
			f.switchOn = false
			f.mu.Unlock()
		}()
		count()
		return "", nil // its window ends when the fleet answers
	}
	return skip("not carried out by this suite")
}

// prepare waits, before a fault on the ensemble, until the ensemble is whole again (a peer
// started again or healed of a cut rejoins some seconds after): a follower cut from a leader
// whose other follower has not synced yet would take the quorum down, and a re-election could
// make the cut peer the leader, so the window would not be the fault it names.
// Before a Galera fault it finds the fleet's writer (galeraWriter), which takes 600 ms that are
// not the fault's window.
func (f *fleetUnderFire) prepare(fault nemesis.Fault) {
	if fault.Kind == nemesis.ZKLeader || fault.Kind == nemesis.FollowerCut {
		f.ensembleWhole(15 * time.Second)
	}
	if slices.Contains(nemesis.GaleraKinds, fault.Kind) && f.nodes != nil {
		f.writer, f.carried = f.galeraWriter()
	}
}

// ensembleWhole waits up to d for a leader and two followers.
func (f *fleetUnderFire) ensembleWhole(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !f.ens.Whole() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
	return true
}

// waitRecovered waits until every replica is ready again, within d.
func (f *fleetUnderFire) waitRecovered(d time.Duration) []bool {
	ok := make([]bool, len(f.rs))
	deadline := time.Now().Add(d)
	for {
		all := true
		for i, r := range f.rs {
			if ok[i] {
				continue
			}
			if resp, err := http.Get(r.url + "/readyz"); err == nil {
				resp.Body.Close()
				ok[i] = resp.StatusCode == 200
			}
			all = all && ok[i]
		}
		if all {
			return ok
		}
		if time.Now().After(deadline) {
			for i, r := range f.rs {
				if !ok[i] {
					f.note("%s not ready %v after every fault was healed", r.name, d)
				}
			}
			return ok
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// audit asks a replica for a SKU's audit, the first that answers.
func (f *fleetUnderFire) audit(sku string) (nemesis.Audit, error) {
	var last string
	for _, r := range f.rs {
		st, m := call("GET", r.url+"/v1/products/"+sku+"/audit", "")
		if st != 200 {
			last = fmt.Sprintf("%s: %d %v", r.name, st, m)
			continue
		}
		b, _ := json.Marshal(m)
		var a nemesis.Audit
		if err := json.Unmarshal(b, &a); err != nil {
			return a, fmt.Errorf("audit of %s: %w", sku, err)
		}
		a.SKU = sku
		return a, nil
	}
	return nemesis.Audit{}, fmt.Errorf("no replica audited %s: %s", sku, last)
}

// trafficOf is how many chunks the proxies ps have passed so far (moved), and how many a stall of
// theirs held back (held).
func trafficOf(ps []*tcpproxy.Proxy) (moved, held int64) {
	for _, p := range ps {
		m, h := p.Traffic()
		moved, held = moved+m, held+h
	}
	return moved, held
}

// firstCommit arms each of a replica's database links with arm (a stall or a cut at a query) for
// its next COMMIT, of which only the first, on whichever link carries it, matches; the channel
// closes when it fired. Its watchers end with stop.
func firstCommit(db []*tcpproxy.Proxy, stop <-chan struct{}, arm func(*tcpproxy.Proxy, func(string) bool) <-chan struct{}) <-chan struct{} {
	fired := make(chan struct{})
	var once sync.Once
	var won atomic.Bool
	match := func(q string) bool { return strings.EqualFold(q, "COMMIT") && won.CompareAndSwap(false, true) }
	for _, p := range db {
		ch := arm(p, match)
		go func() {
			select {
			case <-ch:
				once.Do(func() { close(fired) })
			case <-stop:
			}
		}()
	}
	return fired
}

// galeraLinks are the replicas' links to Galera node n (1 to 3), or to every node when n is 0.
func (f *fleetUnderFire) galeraLinks(n int) []*tcpproxy.Proxy {
	var ps []*tcpproxy.Proxy
	for _, l := range f.links {
		for i, p := range l.db {
			if n == 0 || i == n-1 {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// galeraWriter is the fleet's writer: the node whose links carried the most traffic over 600 ms
// (a replica's cluster sends its statements and its probes, every 500 ms, to its writer alone),
// or 0 when none carried any; and whether each node carried any (with the writers spread, each
// carries some replica's).
func (f *fleetUnderFire) galeraWriter() (writer int, carried []bool) {
	before := make([]int64, len(f.nodes))
	for i := range f.nodes {
		before[i], _ = trafficOf(f.galeraLinks(i + 1))
	}
	time.Sleep(600 * time.Millisecond)
	carried = make([]bool, len(f.nodes))
	most := int64(0)
	for i := range f.nodes {
		after, _ := trafficOf(f.galeraLinks(i + 1))
		d := after - before[i]
		carried[i] = d > 0
		if d > most {
			writer, most = i+1, d
		}
	}
	return writer, carried
}

// injectGalera starts a fault on the Galera cluster (scripts/galera.sh), on the node at
// fault.Node's place from the writer; its heal waits until every node is Synced again, so that
// the next one starts on a whole cluster. It took effect when the node hit was the writer as it
// was hit (for a power failure: when any node carried the fleet's traffic); a fault on another
// node is carried out and counted, not counted as taking effect.
func (f *fleetUnderFire) injectGalera(fault nemesis.Fault, skip func(string) (string, func())) (string, func()) {
	t := f.t
	if f.nodes == nil {
		return skip("the run is not on Galera") // CheckDB refuses it before
	}
	// The node by its place from the writer (Fault.Node, the writer found by prepare); a power
	// failure takes every node.
	writer := f.writer
	node, hit := 0, writer > 0
	if fault.Node > 0 {
		node = (max(writer, 1)-1+fault.Node-1)%len(f.nodes) + 1
		hit = writer > 0 && node == writer
		// With the writers spread, a node some replica writes through is that replica's writer.
		hit = hit || f.spread && node <= len(f.carried) && f.carried[node-1]
	}
	n := strconv.Itoa(node)
	var cmd, healCmd, what string
	var healArgs []string
	switch fault.Kind {
	case nemesis.GaleraKill:
		cmd, healCmd, healArgs = "kill", "restart", []string{n}
		what = fmt.Sprintf("Galera node %d killed (kill -9), restarted (IST) after %.1fs", node, fault.Hold.Seconds())
	case nemesis.GaleraIsolate:
		cmd, healCmd, healArgs = "isolate", "rejoin", []string{n}
		what = fmt.Sprintf("Galera node %d cut off from its peers (gmcast.isolate) for %.1fs", node, fault.Hold.Seconds())
	case nemesis.GaleraPause:
		cmd, healCmd, healArgs = "pause", "resume", []string{n}
		what = fmt.Sprintf("Galera node %d paused (SIGSTOP) for %.1fs (evs.suspect_timeout %v)", node, fault.Hold.Seconds(), nemesis.GaleraSuspect)
	case nemesis.GaleraLag:
		cmd, healCmd, healArgs = "lag", "catch-up", []string{n}
		what = fmt.Sprintf("Galera node %d's replication slowed for %.1fs: held back %v, let through %v, again (FLUSH TABLES WITH READ LOCK)", node, fault.Hold.Seconds(), fault.Delay, nemesis.GaleraLagGap)
	case nemesis.GaleraPowerFail:
		cmd, healCmd = "power-fail", "bootstrap"
		what = fmt.Sprintf("Galera power failure: every node killed at once, bootstrapped after %.1fs", fault.Hold.Seconds())
	}
	var args []string
	if node > 0 {
		args = []string{n}
	}
	if fault.Kind == nemesis.GaleraLag {
		args = append(args, strconv.Itoa(int(fault.Delay.Milliseconds())), strconv.Itoa(int(nemesis.GaleraLagGap.Milliseconds())))
	}
	if _, err := testenv.GaleraRun(t, cmd, args...); err != nil {
		return skip(err.Error())
	}
	switch {
	case hit:
		f.tookEffect(fault.Kind)
		switch {
		case node > 0 && node != writer:
			what += " (a replica's writer)"
		case node > 0:
			what += " (the writer)"
		}
	case writer == 0:
		what += " (no node carried the fleet's traffic)"
	default:
		what += fmt.Sprintf(" (the writer: node %d)", writer)
	}
	return what, func() {
		start := time.Now()
		out, err := testenv.GaleraRun(t, healCmd, healArgs...)
		if err == nil && fault.Kind == nemesis.GaleraPause {
			out, err = testenv.GaleraRun(t, "wait-synced", "60")
		}
		if err != nil {
			f.note("%s: %s did not heal it: %v", fault, healCmd, err)
			f.fail("%s: %s did not heal it: %v", fault, healCmd, err)
			return
		}
		t.Logf("%s: %s, %s (%.1fs)", fault, healCmd, out, time.Since(start).Seconds())
		if f.run.lie == unsafeFlushLie {
			f.setFlush(0) // a node started again reads its my.cnf's 1
		}
	}
}

// staleReadsLie is order's ZKSTOCK_LIE for the control of causal reads on Galera: the replicas'
// sessions read with wsrep_sync_wait=0, which the lie makes them accept, and each writes to a node
// of its own (fleetUnderFire.spread), so that a read may miss a commit another node acknowledged.
const staleReadsLie = "stale-reads"

// unsafeFlushLie is order's ZKSTOCK_LIE for the control of durable commits on Galera: the replicas
// accept innodb_flush_log_at_trx_commit=0, which the run sets on every node, so that a power
// failure of every node loses commits the cluster acknowledged.
const unsafeFlushLie = "unsafe-flush"

// setFlush sets innodb_flush_log_at_trx_commit on every running node of the Galera cluster (a
// global setting, of the node's own InnoDB: Galera does not replicate it). A node that does not
// answer is noted.
func (f *fleetUnderFire) setFlush(v int) {
	for i, dsn := range testenv.GaleraAdminDSNs(f.t) {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			f.note("node %d: %v", i+1, err)
			continue
		}
		cfg.Timeout = 2 * time.Second
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err == nil {
			_, err = db.Exec(fmt.Sprintf("SET GLOBAL innodb_flush_log_at_trx_commit = %d", v))
			db.Close()
		}
		if err != nil {
			f.note("node %d: set innodb_flush_log_at_trx_commit=%d: %v", i+1, v, err)
		}
	}
}
