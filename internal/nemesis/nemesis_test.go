package nemesis

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/lincheck"
)

func plan(seed uint64) Plan {
	return Plan{Seed: seed, Duration: 30 * time.Minute, Kinds: Kinds, Replicas: 3, Mode: "zk", Session: 4 * time.Second}
}

// The schedule is the seed's alone: a failing run is replayed from it.
func TestScheduleIsTheSeeds(t *testing.T) {
	a, b := Schedule(plan(7)), Schedule(plan(7))
	if len(a) == 0 || !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 7 gave %d and %d faults, or different ones", len(a), len(b))
	}
	if c := Schedule(plan(8)); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 gave the same schedule")
	}
}

// Faults are staggered a few seconds apart, start within the duration, cover every kind over a
// long run, and never claim one resource twice at once, so that every stop heals its start.
func TestScheduleStaggersAndAlternates(t *testing.T) {
	p := plan(1)
	fs := Schedule(p)
	if n := len(fs); n < 300 {
		t.Fatalf("%d faults in 30 minutes, want hundreds", n)
	}
	mean := fs[len(fs)-1].At / time.Duration(len(fs))
	if mean < 2*time.Second || mean > 6*time.Second {
		t.Errorf("mean gap %v, want a few seconds", mean)
	}
	counts := Count(fs)
	for _, k := range Kinds {
		if counts[k] < 10 {
			t.Errorf("%s: %d faults", k, counts[k])
		}
	}
	for i, f := range fs {
		if f.At >= p.Duration || i > 0 && f.At < fs[i-1].At {
			t.Fatalf("fault %d (%v) out of order or past the end", i, f)
		}
		for _, g := range fs[:i] {
			if g.At+max(g.Hold, p.Session) > f.At && Contend(g, f) {
				t.Fatalf("%v and %v claim the same resource at once", g, f)
			}
		}
	}
}

// A switch stays within the class of the mode under test, and always changes the mode.
func TestSwitchesStayInTheModesClass(t *testing.T) {
	for _, mode := range []string{"zk", "none", "redis"} {
		p := plan(3)
		p.Mode, p.Kinds = mode, []Kind{Switch, Kill}
		current := mode
		n := 0
		for _, f := range Schedule(p) {
			if f.Kind != Switch {
				continue
			}
			n++
			if !slices.Contains(ClassOf(mode), f.Mode) || f.Mode == current || mode != "none" && f.Mode == "none" {
				t.Fatalf("%s: switch from %s to %s", mode, current, f.Mode)
			}
			current = f.Mode
		}
		if n == 0 {
			t.Fatalf("%s: no switch", mode)
		}
	}
}

func TestParseKinds(t *testing.T) {
	if ks, err := ParseKinds(""); err != nil || len(ks) != len(Kinds) {
		t.Fatalf("all: %v %v", ks, err)
	}
	if ks, err := ParseKinds("pause,kill,pause"); err != nil || !reflect.DeepEqual(ks, []Kind{Pause, Kill}) {
		t.Fatalf("pause,kill: %v %v", ks, err)
	}
	if _, err := ParseKinds("pause,flood"); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
}

// A control passes only if caught; a safe mode only with no anomaly at all.
func TestJudge(t *testing.T) {
	s := Summary{Control: true, Anomalies: map[string]int{NeverRecovered: 1}}
	if s.Judge(); s.Passed {
		t.Error("a control caught by nothing but a replica that never recovered passed")
	}
	s = Summary{Control: true, Anomalies: map[string]int{LostUpdates: 2}}
	if s.Judge(); !s.Passed || !s.Caught {
		t.Error("a control with lost updates did not pass")
	}
	s = Summary{Anomalies: map[string]int{Undecided: 1}}
	if s.Judge(); s.Passed {
		t.Error("a safe mode with an undecided history passed")
	}
}

// The timeline shades every fault window and draws every unknown outcome.
func TestTimeline(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var ops []Op
	for i := range 50000 {
		ops = append(ops, Op{Start: at(float64(i) / 1000), End: at(float64(i)/1000 + 0.01), Class: "ok"})
	}
	ops = append(ops, Op{Start: at(20), End: at(26), Class: "unknown", What: "buy 503 outcome_unknown"})
	svg := Timeline(&Summary{Mode: "zk", Seed: 1}, t0, ops, []Window{{Kind: Pause, Start: at(10), End: at(16), What: "pause order2"},
		{Kind: CutDB, Start: at(12), End: at(14), What: "cut-db order1"}})
	for _, want := range []string{"pause order2", "cut-db order1", "buy 503 outcome_unknown", ">pause<", ">cut-db<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the timeline lacks %q", want)
		}
	}
	if n := strings.Count(svg, "<circle"); n > 30010 {
		t.Errorf("%d points drawn of 50001: not thinned", n)
	}
}

// The picture is the run's: a 240 s run (its last request begun at 239 s and answered 30 s later)
// has its time axis end at 240 s, not at a round number far past it; the title counts what
// summary.json counts; every class is drawn, the legend's counts add up to the summary's
// requests, and the unknown ones are the summary's Unknown, as the checker read the answers
// (a 503 storage_unavailable is a refusal, an outcome_unknown unknown, a cut read a refusal).
func TestTimelineAgreesWithTheRun(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	obs := []lincheck.Observation{
		{Kind: lincheck.Buy, Answer: "201", Result: lincheck.OK, InHistory: true},
		{Kind: lincheck.Buy, Answer: "503 storage_unavailable", Result: lincheck.Refused},
		{Kind: lincheck.Buy, Answer: "409 out_of_stock", Result: lincheck.OutOfStock, InHistory: true},
		{Kind: lincheck.Cart, Answer: "503 outcome_unknown", Result: lincheck.Unknown, InHistory: true},
		{Kind: lincheck.Cancel, Answer: "cut", Result: lincheck.Unknown, InHistory: true},
		{Kind: lincheck.Read, Answer: "cut", Result: lincheck.Unknown},
		{Kind: lincheck.Buy, Answer: "not sent", Result: lincheck.Unknown},
	}
	var ops []Op
	for i := range 2400 {
		o := obs[i%len(obs)]
		ops = append(ops, Op{Start: at(float64(i) / 10), End: at(float64(i)/10 + 0.02), Class: PointClass(o), What: o.Answer})
	}
	ops = append(ops, Op{Start: at(239), End: at(269), Class: ClassUnknown, What: "buy cut"})
	unknown := 0
	for _, o := range ops {
		if o.Class == ClassUnknown {
			unknown++
		}
	}
	if want := 343*2 + 1; unknown != want { // 2400 = 342×7 + 6: 343 of the cart and of the cancel, and the last
		t.Fatalf("%d unknown, want %d", unknown, want)
	}
	sum := &Summary{Mode: "zk", Seed: 7, DurationS: 240, Requests: len(ops), Ops: 1500, Unknown: unknown, Refused: 400}
	svg := Timeline(sum, t0, ops, []Window{{Kind: Kill, Start: at(200), End: at(230), What: "kill order1"}})
	ticks := regexp.MustCompile(`text-anchor="middle"[^>]*>([0-9.]+)</text>`).FindAllStringSubmatch(svg, -1)
	if len(ticks) < 3 {
		t.Fatalf("%d ticks on the time axis", len(ticks))
	}
	if last, _ := strconv.ParseFloat(ticks[len(ticks)-1][1], 64); last > 240 || last < 200 {
		t.Errorf("the time axis of a 240 s run ends at %v s", last)
	}
	title := fmt.Sprintf("%d requests, %d operations checked (%d unknown), %d refused", sum.Requests, sum.Ops, sum.Unknown, sum.Refused)
	if !strings.Contains(svg, title) {
		t.Errorf("the title does not say %q", title)
	}
	total := 0
	for _, m := range regexp.MustCompile(`data-class="([a-z]+)" data-count="([0-9]+)"`).FindAllStringSubmatch(svg, -1) {
		n, _ := strconv.Atoi(m[2])
		total += n
		if n == 0 {
			t.Errorf("no %s point drawn", m[1])
		}
		if m[1] == ClassUnknown && n != sum.Unknown {
			t.Errorf("%d unknown points drawn, the summary says %d", n, sum.Unknown)
		}
	}
	if total != sum.Requests {
		t.Errorf("the legend counts %d points, the summary %d requests", total, sum.Requests)
	}
}

func TestPerMode(t *testing.T) {
	for _, c := range []struct{ mode, spec, want string }{
		{"zk", "60s", "60s"},
		{"none", "none=15s;*=50s", "15s"},
		{"zk", "none=15s;*=50s", "50s"},
		{"zk", "redis=pause", ""},
		{"redis", "redis=pause-at-commit,redis-restart;zk-unfenced=pause", "pause-at-commit,redis-restart"},
	} {
		if got := PerMode(c.mode, c.spec); got != c.want {
			t.Errorf("PerMode(%q, %q) = %q, want %q", c.mode, c.spec, got, c.want)
		}
	}
}

func TestEveryKindHasAColourOfItsOwn(t *testing.T) {
	seen := map[string]Kind{}
	for _, k := range append(slices.Clone(Kinds), NamedKinds...) {
		c := KindColor(k)
		if other, ok := seen[c]; ok {
			t.Errorf("%s and %s are both drawn in %s", other, k, c)
		}
		seen[c] = k
	}
}

// Contend is what the run waits on when it falls behind the schedule: faults on one replica's
// process or link, or on one server, contend; faults on different ones do not.
func TestContend(t *testing.T) {
	for _, c := range []struct {
		a, b Fault
		want bool
	}{
		{Fault{Kind: Kill, Replica: 1}, Fault{Kind: Kill, Replica: 1}, true},
		{Fault{Kind: Kill, Replica: 1}, Fault{Kind: Pause, Replica: 1}, true},
		{Fault{Kind: Kill, Replica: 1}, Fault{Kind: Kill, Replica: 2}, false},
		{Fault{Kind: Kill, Replica: 1}, Fault{Kind: CutZK, Replica: 1}, false},
		{Fault{Kind: Isolate, Replica: 0}, Fault{Kind: CutDB, Replica: 0}, true},
		{Fault{Kind: PauseAtCommit, Replica: 0}, Fault{Kind: CutDB, Replica: 0}, true},
		{Fault{Kind: ZKLeader, Replica: -1}, Fault{Kind: FollowerCut, Replica: -1}, true},
		{Fault{Kind: DBRestart, Replica: -1}, Fault{Kind: BlockCommits, Replica: -1}, true},
		{Fault{Kind: DBRestart, Replica: -1}, Fault{Kind: RedisRestart, Replica: -1}, false},
		{Fault{Kind: GaleraKill, Replica: -1, Node: 1}, Fault{Kind: GaleraPause, Replica: -1, Node: 2}, true},
		{Fault{Kind: GaleraPowerFail, Replica: -1}, Fault{Kind: GaleraIsolate, Replica: -1, Node: 3}, true},
		{Fault{Kind: GaleraKill, Replica: -1, Node: 1}, Fault{Kind: CutDB, Replica: 0}, false},
	} {
		if got := Contend(c.a, c.b); got != c.want || Contend(c.b, c.a) != c.want {
			t.Errorf("Contend(%v, %v) = %v, want %v both ways", c.a.Kind, c.b.Kind, got, c.want)
		}
	}
}

// The Galera kinds are drawn only when named: "all" draws none of them, so every schedule drawn
// before they existed is drawn the same.
func TestGaleraKindsOnlyWhenNamed(t *testing.T) {
	all, err := ParseKinds("")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range GaleraKinds {
		if slices.Contains(all, k) {
			t.Errorf("%s is drawn under all", k)
		}
		if !slices.Contains(NamedKinds, k) {
			t.Errorf("%s cannot be named", k)
		}
	}
	for seed := uint64(1); seed <= 50; seed++ {
		for _, f := range Schedule(plan(seed)) {
			if f.Node != 0 || slices.Contains(GaleraKinds, f.Kind) {
				t.Fatalf("seed %d drew %v under all", seed, f)
			}
		}
	}
}

// A Galera schedule hits each node, one Galera fault at a time with the recovery after it left
// free, a pause always past the peers' suspicion; the replica kinds mixed in keep their targets.
func TestGaleraSchedule(t *testing.T) {
	kinds, err := ParseKinds("galera-kill,galera-isolate,galera-pause,galera-lag,galera-power-fail,kill,cut-db")
	if err != nil {
		t.Fatal(err)
	}
	p := plan(11)
	p.Kinds = kinds
	fs := Schedule(p)
	counts := Count(fs)
	for _, k := range kinds {
		if counts[k] < 10 {
			t.Errorf("%s: %d faults in 30 minutes", k, counts[k])
		}
	}
	nodes := map[int]int{}
	var last *Fault
	for i, f := range fs {
		switch f.Kind {
		case GaleraKill, GaleraIsolate, GaleraPause, GaleraLag:
			if f.Node < 1 || f.Node > 3 || f.Replica != -1 {
				t.Fatalf("%v: node %d, replica %d", f, f.Node, f.Replica)
			}
			nodes[f.Node]++
		case GaleraPowerFail:
			if f.Node != 0 || f.Replica != -1 {
				t.Fatalf("%v: a power failure names node %d, replica %d", f, f.Node, f.Replica)
			}
		default:
			if f.Node != 0 || f.Replica < 0 {
				t.Fatalf("%v: node %d, replica %d", f, f.Node, f.Replica)
			}
			continue
		}
		if f.Kind == GaleraPause && f.Hold <= GaleraSuspect {
			t.Errorf("%v: a pause within evs.suspect_timeout (%v)", f, GaleraSuspect)
		}
		if last != nil && last.At+max(last.Hold, p.Session)+settle(last.Kind) > f.At {
			t.Fatalf("%v starts before %v has ended and settled", f, *last)
		}
		last = &fs[i]
	}
	for n := 1; n <= 3; n++ {
		if nodes[n] < 5 {
			t.Errorf("node %d hit %d times", n, nodes[n])
		}
	}
	if all := nodes[1] + nodes[2] + nodes[3]; nodes[1]*3 < all || nodes[1]*3 > all*2 {
		t.Errorf("the writer hit %d times of %d: want about half", nodes[1], all)
	}
	if s := (Fault{Kind: GaleraKill, At: time.Second, Hold: 2 * time.Second, Replica: -1, Node: 1}).String(); !strings.Contains(s, "the writer") {
		t.Errorf("%q does not name the node", s)
	}
}

// A run on one server refuses the Galera kinds; a run on Galera refuses the single-server kinds
// when named, and leaves them out of all.
func TestCheckDB(t *testing.T) {
	parse := func(spec string) []Kind {
		ks, err := ParseKinds(spec)
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	if _, err := CheckDB(DBSingle, "kill,galera-kill", parse("kill,galera-kill")); err == nil || !strings.Contains(err.Error(), "NEMESIS_DB=galera") {
		t.Errorf("galera-kill on one server: %v", err)
	}
	if ks, err := CheckDB(DBSingle, "", parse("")); err != nil || !reflect.DeepEqual(ks, Kinds) {
		t.Errorf("all on one server: %v %v", ks, err)
	}
	if _, err := CheckDB(DBGalera, "db-restart,galera-kill", parse("db-restart,galera-kill")); err == nil {
		t.Error("db-restart was accepted on Galera")
	}
	ks, err := CheckDB(DBGalera, "", parse(""))
	if err != nil || slices.Contains(ks, DBRestart) || slices.Contains(ks, BlockCommits) || len(ks) != len(Kinds)-2 {
		t.Errorf("all on Galera: %v %v", ks, err)
	}
	if ks, err := CheckDB(DBGalera, "galera-pause,kill", parse("galera-pause,kill")); err != nil || !reflect.DeepEqual(ks, []Kind{GaleraPause, Kill}) {
		t.Errorf("galera-pause,kill on Galera: %v %v", ks, err)
	}
	if _, err := CheckDB("postgres", "", parse("")); err == nil {
		t.Error("an unknown database was accepted")
	}
}
