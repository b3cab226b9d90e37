// Package nemesis composes faults at random, as Jepsen's combined nemesis does: a seeded schedule
// of fault windows (a start, then a stop a few seconds later) over many kinds, staggered so that
// they overlap, and the report of a run (summary.json and a timeline picture).
//
// The schedule is a pure function of its Plan: the same seed gives the same faults, at the same
// offsets, on the same targets, whatever the machine does, so a failing run is replayed from its
// seed (the service's timing aside). Carrying the faults out is the fault suite's job
// (faults/nemesis_test.go), which starts the processes and the proxies this package knows nothing of.
package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The kinds of fault. A replica's links (to ZooKeeper, the database, Redis) each pass through a
// proxy of its own, which black-holes them (nothing passes, nothing is closed) or slows them.
const (
	Kill  Kind = "kill"  // kill -9 a replica, start it again after the window
	Pause Kind = "pause" // SIGSTOP a replica past its ZooKeeper session, then SIGCONT
	// PauseAtCommit is Pause at the worst moment: the replica is stopped as its next COMMIT goes
	// out, after its last look at its lock, and the COMMIT reaches the database after SIGCONT,
	// as when a GC pause falls between the check and the write. Only a fence stops that write.
	PauseAtCommit Kind = "pause-at-commit"
	CutZK         Kind = "cut-zk"    // a replica's ZooKeeper links black-holed
	CutDB         Kind = "cut-db"    // a replica's database link black-holed
	CutRedis      Kind = "cut-redis" // a replica's Redis link black-holed
	Isolate       Kind = "isolate"   // all of a replica's links black-holed at once
	Slow          Kind = "slow"      // all of a replica's links delayed (Fault.Delay each way)
	ZKLeader      Kind = "zk-leader" // the ZooKeeper ensemble's leader killed, started again after
	// FollowerCut black-holes the links between a ZooKeeper follower and its leader. The follower
	// goes on answering its clients' reads and pings for up to syncLimit × tickTime while the
	// leader, hearing nothing of their sessions, expires them: a holder there must learn it lost
	// its lock before another client can hold it.
	FollowerCut  Kind = "follower-cut"
	DBRestart    Kind = "db-restart"    // MariaDB stopped, started again after the window
	BlockCommits Kind = "block-commits" // BACKUP STAGE BLOCK_COMMIT held for the window
	RedisRestart Kind = "redis-restart" // Redis stopped, started again (empty: no persistence)
	Switch       Kind = "switch-mode"   // the fleet's lock mode switched through a replica
	// LoseCommitReply lets a replica's next COMMIT reach the database, which commits it, and cuts
	// the connection before the reply comes back, as a route that fails between the two: the
	// replica must learn what became of it, and answer so.
	LoseCommitReply Kind = "lose-commit-reply"
	// The Galera kinds act on the three-node cluster under the fleet (a run with NEMESIS_DB=galera,
	// scripts/galera.sh) and on its node Fault.Node, one at a time.
	GaleraKill    Kind = "galera-kill"    // kill -9 a node, restarted after the window (IST)
	GaleraIsolate Kind = "galera-isolate" // a node cut off from its peers (gmcast.isolate: non-primary), rejoined after
	// GaleraPause SIGSTOPs a node past evs.suspect_timeout (5 s), so that its peers go on without
	// it, then SIGCONTs it: a node that answers again from an old view, until it learns it left.
	GaleraPause Kind = "galera-pause"
	// GaleraLag slows a node's replication for the window (scripts/galera.sh lag, in pulses): the
	// node applies its peers' commits, which go on without it, only GaleraLagGap in every
	// Fault.Delay + GaleraLagGap, so it runs up to Fault.Delay behind them, and catches up after.
	// A read there that is not causal answers from before them; a causal one waits.
	GaleraLag Kind = "galera-lag"
	// GaleraPowerFail kills every node at once and bootstraps the cluster from the most advanced
	// after the window: what the cluster acknowledged must survive it.
	GaleraPowerFail Kind = "galera-power-fail"
)

// Kinds is every kind the fault suite can carry out, in the order reports list them.
var Kinds = []Kind{Kill, Pause, PauseAtCommit, CutZK, CutDB, CutRedis, Isolate, Slow, ZKLeader, FollowerCut, DBRestart, BlockCommits, RedisRestart, Switch}

// NamedKinds are kinds drawn only when named (NEMESIS_FAULTS), never under "all": a kind added to
// Kinds would draw every seed's schedule anew.
var NamedKinds = []Kind{LoseCommitReply, GaleraKill, GaleraIsolate, GaleraPause, GaleraPowerFail, GaleraLag}

// GaleraKinds act on a Galera cluster: a run on one server refuses them (CheckDB).
var GaleraKinds = []Kind{GaleraKill, GaleraIsolate, GaleraPause, GaleraLag, GaleraPowerFail}

// SingleServerKinds act on the one MariaDB server: a run on Galera refuses them when named, and
// leaves them out of "all" (CheckDB).
var SingleServerKinds = []Kind{DBRestart, BlockCommits}

// The databases a run may have under its fleet (NEMESIS_DB).
const (
	DBSingle = "mariadb" // one MariaDB server (the default)
	DBGalera = "galera"  // a three-node MariaDB Galera cluster
)

// CheckDB fits kinds, parsed from spec (ParseKinds), to the run's database db: it refuses a
// Galera kind on one server, and a single-server kind named on Galera, with what to do instead;
// on Galera "all" (an empty spec) means every kind but the single-server ones.
func CheckDB(db, spec string, kinds []Kind) ([]Kind, error) {
	switch db {
	case DBSingle:
		for _, k := range kinds {
			if slices.Contains(GaleraKinds, k) {
				return nil, fmt.Errorf("nemesis: %s acts on a Galera cluster, and this run is on one MariaDB server: run it with NEMESIS_DB=galera (make nemesis DB=galera)", k)
			}
		}
		return kinds, nil
	case DBGalera:
		all := strings.TrimSpace(spec) == "" || spec == "all"
		var out []Kind
		for _, k := range kinds {
			if !slices.Contains(SingleServerKinds, k) {
				out = append(out, k)
				continue
			}
			if !all {
				return nil, fmt.Errorf("nemesis: %s acts on one MariaDB server, and this run is on Galera: name galera-kill, galera-pause, galera-lag or galera-power-fail instead", k)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("nemesis: unknown database %q (known: %s, %s)", db, DBSingle, DBGalera)
}

// ParseKinds reads a comma-separated list of kinds; empty means all (Kinds).
func ParseKinds(s string) ([]Kind, error) {
	if strings.TrimSpace(s) == "" || s == "all" {
		return slices.Clone(Kinds), nil
	}
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		if !slices.Contains(Kinds, k) && !slices.Contains(NamedKinds, k) {
			return nil, fmt.Errorf("nemesis: unknown fault kind %q (known: %v, %v)", k, Kinds, NamedKinds)
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// The lock modes by what they promise. A switch of the fleet's mode stays within the class of the
// mode under test: a fenced run that switched to an unsafe mode would be caught for the unsafe
// mode's sake, and prove nothing of its own.
var (
	SafeModes   = []string{"zk", "zk-batch", "zk-herd", "redis-fenced", "db-forupdate", "db-cas"}
	UnsafeModes = []string{"none", "zk-unfenced", "redis", "db-locktable"}
)

// IsControl reports whether a run's mode is a negative control, which the run must catch: a lock
// mode known to be unsafe under some fault, or any mode with a planted lie (SplitLie).
func IsControl(run string) bool {
	mode, lie := SplitLie(run)
	return lie != "" || slices.Contains(UnsafeModes, mode)
}

// SplitLie splits a run's mode into the lock mode and the lie planted in its replicas, if any:
// "zk+unconfirmed-not-sold" runs zk on replicas built to lie so (order's ZKSTOCK_LIE, which only
// a build with the zkstock_lies tag reads).
func SplitLie(run string) (mode, lie string) {
	mode, lie, _ = strings.Cut(run, "+")
	return mode, lie
}

// ClassOf is the modes a run in mode may switch between. A control other than none never
// switches to none: none oversells with no fault at all, so a control caught after such a switch
// would be caught for none's sake.
func ClassOf(mode string) []string {
	switch {
	case mode == "none":
		return UnsafeModes
	case IsControl(mode):
		return slices.DeleteFunc(slices.Clone(UnsafeModes), func(m string) bool { return m == "none" })
	}
	return SafeModes
}

// Fault is one window of one fault.
type Fault struct {
	Kind Kind          `json:"kind"`
	At   time.Duration `json:"at_ns"`   // from the start of the run
	Hold time.Duration `json:"hold_ns"` // until the fault is healed (0 for a switch: it lasts as long as it waits)
	// Replica is the replica's index for the kinds about one replica (and the one a switch goes
	// through), -1 otherwise.
	Replica int    `json:"replica"`
	Mode    string `json:"mode,omitempty"` // Switch: the mode switched to
	// Delay is Slow's delay each way, and how far behind a GaleraLag's node runs at most.
	Delay time.Duration `json:"delay_ns,omitempty"`
	// Follower is FollowerCut's follower: the first (0) or second (1) of the two, in id order.
	Follower int `json:"follower,omitempty"`
	// Node is the Galera node a Galera kind acts on, by its place from the fleet's writer as the
	// fault starts (which the schedule cannot know): 1 the writer, 2 and 3 the nodes after it in
	// node order. 0 for the other kinds, and for a power failure, which takes every node.
	Node int `json:"node,omitempty"`
}

// End is when the fault is healed.
func (f Fault) End() time.Duration { return f.At + f.Hold }

func (f Fault) String() string {
	s := fmt.Sprintf("%6.1fs %-13s", f.At.Seconds(), f.Kind)
	if f.Replica >= 0 {
		s += fmt.Sprintf(" order%d", f.Replica+1)
	}
	if f.Hold > 0 {
		s += fmt.Sprintf(" for %.1fs", f.Hold.Seconds())
	}
	if f.Mode != "" {
		s += " → " + f.Mode
	}
	switch {
	case f.Delay > 0 && f.Kind == GaleraLag:
		s += fmt.Sprintf(" (up to %v behind)", f.Delay)
	case f.Delay > 0:
		s += fmt.Sprintf(" (+%v each way)", f.Delay)
	}
	if f.Kind == FollowerCut {
		s += fmt.Sprintf(" (follower %d of 2)", f.Follower+1)
	}
	switch {
	case f.Node == 1:
		s += " (the writer)"
	case f.Node > 1:
		s += fmt.Sprintf(" (the writer's node +%d)", f.Node-1)
	}
	return s
}

// Plan says what to schedule.
type Plan struct {
	Seed     uint64
	Duration time.Duration // faults start within it; the run heals what is left at its end
	Kinds    []Kind
	Replicas int
	Mode     string        // the run's mode: a switch goes to another of its class
	Session  time.Duration // the replicas' ZooKeeper session: a pause outlasts it
	// Gap is the mean time between two fault starts (3 s if 0); the gaps are drawn from a third to
	// five thirds of it.
	Gap time.Duration
	// Nodes is the Galera cluster's size, for the Galera kinds (3 if 0): half of the faults on
	// one node hit the writer, the others one of the other nodes.
	Nodes int
}

// GaleraLagGap is how long a lagging node's replication is let through between two holds.
const GaleraLagGap = 100 * time.Millisecond

// GaleraSuspect is Galera's evs.suspect_timeout, the default scripts/galera.sh keeps: a node
// silent for longer is dropped from the primary component by its peers.
const GaleraSuspect = 5 * time.Second

// settle is how long the schedule leaves a kind's resource to its recovery after the window: a
// killed node's restart by IST and its wait for Synced, a cluster's bootstrap. Only the Galera
// kinds have one, so that the other kinds' schedules stay as they were drawn before them.
func settle(k Kind) time.Duration {
	switch k {
	case GaleraKill, GaleraIsolate, GaleraPause, GaleraLag:
		return 5 * time.Second
	case GaleraPowerFail:
		return 15 * time.Second
	}
	return 0
}

// Schedule draws the plan's faults, in the order they start. Faults of different kinds overlap
// freely, but no two at once claim one resource (a replica's process, one of its links, a
// server), so that each fault's start and stop alternate and its stop heals it whole.
func Schedule(p Plan) []Fault {
	if len(p.Kinds) == 0 || p.Replicas < 1 || p.Duration <= 0 {
		return nil
	}
	gap := p.Gap
	if gap <= 0 {
		gap = 3 * time.Second
	}
	session := p.Session
	if session <= 0 {
		session = 4 * time.Second
	}
	nodes := p.Nodes
	if nodes <= 0 {
		nodes = 3
	}
	rng := rand.New(rand.NewPCG(p.Seed, 0x6e656d65736973))
	drawNode := func() int {
		if nodes < 2 || rng.IntN(2) == 0 {
			return 1
		}
		return 2 + rng.IntN(nodes-1)
	}
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	busy := map[string]time.Duration{} // resource → when it is free again
	class := ClassOf(p.Mode)
	current := p.Mode
	var out []Fault
	for at := between(gap/3, gap*5/3); at < p.Duration; at += between(gap/3, gap*5/3) {
		k := p.Kinds[rng.IntN(len(p.Kinds))]
		f := Fault{Kind: k, At: at, Replica: -1}
		switch k {
		case Kill:
			f.Hold = between(time.Second, 5*time.Second)
		case Pause:
			f.Hold = session + between(time.Second, 3*time.Second)
		case PauseAtCommit:
			// Long enough for ZooKeeper to end the session and another replica to take the
			// lock and read, short of the database's 10 s wait_timeout, which would roll the
			// stopped transaction back and hide the stale write.
			f.Hold = session + between(3500*time.Millisecond, 5000*time.Millisecond)
		case CutZK, CutDB, CutRedis:
			f.Hold = between(2*time.Second, 8*time.Second)
		case Isolate:
			f.Hold = between(3*time.Second, 8*time.Second)
		case Slow:
			f.Hold = between(3*time.Second, 8*time.Second)
			f.Delay = between(20*time.Millisecond, 300*time.Millisecond).Round(time.Millisecond)
		case ZKLeader:
			f.Hold = between(2*time.Second, 6*time.Second)
		case FollowerCut:
			// At least a session, so that the leader can expire the sessions the follower still
			// answers; from short of the servers' syncLimit × tickTime, when the follower never
			// notices, to well past it, when it leaves the quorum and its clients move.
			f.Hold = between(session, session+8*time.Second)
			f.Follower = rng.IntN(2)
		case DBRestart:
			f.Hold = between(time.Second, 4*time.Second)
		case BlockCommits:
			f.Hold = between(2*time.Second, 6*time.Second)
		case LoseCommitReply:
			f.Hold = between(2*time.Second, 6*time.Second) // armed until a COMMIT comes, or the window ends
		case RedisRestart:
			f.Hold = between(0, 2*time.Second)
		case GaleraKill:
			f.Hold = between(time.Second, 6*time.Second)
			f.Node = drawNode()
		case GaleraIsolate:
			f.Hold = between(2*time.Second, 8*time.Second)
			f.Node = drawNode()
		case GaleraPause:
			// Past the peers' suspicion, so that they go on without the node, and up to twice it.
			f.Hold = between(GaleraSuspect+time.Second, 2*GaleraSuspect)
			f.Node = drawNode()
		case GaleraLag:
			f.Hold = between(2*time.Second, 8*time.Second)
			f.Delay = between(100*time.Millisecond, 500*time.Millisecond).Round(time.Millisecond)
			f.Node = drawNode()
		case GaleraPowerFail:
			f.Hold = between(time.Second, 4*time.Second)
		case Switch:
			var to []string
			for _, m := range class {
				if m != current {
					to = append(to, m)
				}
			}
			f.Mode = to[rng.IntN(len(to))]
		}
		// The target: a replica drawn at random (a switch goes through one too), the first of
		// the replicas from there whose resources are free.
		first := rng.IntN(p.Replicas)
		placed := false
		for i := range p.Replicas {
			if aboutReplica(k) || k == Switch {
				f.Replica = (first + i) % p.Replicas
			}
			res := resources(f)
			if !free(busy, res, at) {
				if !aboutReplica(k) {
					break
				}
				continue
			}
			for _, r := range res {
				// A switch holds the fleet until it answers, which the schedule cannot know: the
				// next may start no sooner than a session later, by when a dead member's hold has
				// gone.
				busy[r] = at + max(f.Hold, session) + settle(k)
			}
			placed = true
			break
		}
		if !placed {
			continue
		}
		if k == Switch {
			current = f.Mode
		}
		out = append(out, f)
	}
	return out
}

func aboutReplica(k Kind) bool {
	switch k {
	case Kill, Pause, PauseAtCommit, CutZK, CutDB, CutRedis, Isolate, Slow, LoseCommitReply:
		return true
	}
	return false
}

// Contend says whether faults a and b claim a resource in common: the schedule never has them
// on at once, and a run that falls behind it must not either.
func Contend(a, b Fault) bool {
	for _, r := range resources(a) {
		if slices.Contains(resources(b), r) {
			return true
		}
	}
	return false
}

// resources are what a fault claims while it lasts.
func resources(f Fault) []string {
	r := fmt.Sprint(f.Replica)
	switch f.Kind {
	case Kill, Pause:
		return []string{"process " + r}
	case PauseAtCommit:
		return []string{"process " + r, "db link " + r}
	case CutZK:
		return []string{"zk link " + r}
	case CutDB, LoseCommitReply:
		return []string{"db link " + r}
	case CutRedis:
		return []string{"redis link " + r}
	case Isolate:
		return []string{"zk link " + r, "db link " + r, "redis link " + r}
	case Slow:
		return []string{"delay " + r}
	case ZKLeader, FollowerCut:
		// One at a time, so that the leader a cut is made against is still the leader.
		return []string{"ensemble"}
	case DBRestart, BlockCommits:
		return []string{"database"}
	case RedisRestart:
		return []string{"redis"}
	case Switch:
		return []string{"fleet"}
	case GaleraKill, GaleraIsolate, GaleraPause, GaleraLag, GaleraPowerFail:
		// One at a time: two nodes of three down at once leave no primary component, which is
		// the power failure's own fault, not theirs.
		return []string{"galera"}
	}
	return []string{string(f.Kind)}
}

func free(busy map[string]time.Duration, res []string, at time.Duration) bool {
	for _, r := range res {
		if busy[r] > at {
			return false
		}
	}
	return true
}

// Count is the faults per kind.
func Count(fs []Fault) map[Kind]int {
	out := map[Kind]int{}
	for _, f := range fs {
		out[f.Kind]++
	}
	return out
}

// PerMode picks mode's value from a setting that may name values per mode:
// "zk-unfenced=pause,isolate;redis=redis-restart;*=kill" (a mode not named gets "*"'s, or
// nothing); a value without "=" is every mode's.
func PerMode(mode, spec string) string {
	if !strings.Contains(spec, "=") {
		return spec
	}
	def := ""
	for _, part := range strings.Split(spec, ";") {
		m, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch m {
		case mode:
			return v
		case "*":
			def = v
		}
	}
	return def
}
