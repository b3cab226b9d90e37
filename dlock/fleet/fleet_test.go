package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/fleet"
	"github.com/zkstock/zkstock/dlock/testsupport/tcpproxy"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

func TestMain(m *testing.M) {
	testenv.Require("ZK_SERVERS")
	os.Exit(m.Run())
}

var modes = []string{"a", "b", "c"}

type member struct {
	*fleet.Member
	c *dlock.Client
}

// newRoot is a fleet's root of the test's own, deleted when the test ends.
func newRoot(t *testing.T) string {
	root := "/zkstock-test/fleets/" + testenv.UniqueName(t)
	testenv.DeleteZKTreeAtCleanup(t, testenv.ZKServers(t), root)
	return root
}

// join starts a member of the fleet at root on a session of its own, and waits until it serves.
func join(t *testing.T, root, id string, servers []string, edit func(*fleet.Config), opts ...dlock.Option) member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := dlock.Connect(ctx, servers, append([]dlock.Option{dlock.WithOwner(id), dlock.WithSessionTimeout(4 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cfg := fleet.Config{Root: root, ID: id, Seed: "a", Modes: modes, SwitchTimeout: 10 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	m, err := fleet.Join(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	if err := m.Joined(ctx); err != nil {
		t.Fatal(err)
	}
	return member{m, c}
}

func fleetOf(t *testing.T, n int) (string, []member) {
	root := newRoot(t)
	var ms []member
	for i := range n {
		ms = append(ms, join(t, root, fmt.Sprintf("m%d", i+1), testenv.ZKServers(t), nil))
	}
	return root, ms
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// The fleet starts in the seed of its first member; a later member with another seed runs the
// fleet's mode, not its own.
func TestSeedOnlyStartsAFleetThatHasNone(t *testing.T) {
	root, ms := fleetOf(t, 1)
	late := join(t, root, "late", testenv.ZKServers(t), func(c *fleet.Config) { c.Seed = "b" })
	for _, m := range []member{ms[0], late} {
		p, err := m.Enter(ctxFor(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Mode().Name; got != "a" {
			t.Errorf("a member runs %q, want the fleet's %q", got, "a")
		}
		p.Exit()
	}
}

// A switch through one member reaches every member, and waits for a pass open on another one:
// the barrier. Meanwhile that member admits nothing new; afterwards all run the new mode.
func TestSwitchWaitsForOpenPassesAndReachesEveryMember(t *testing.T) {
	_, ms := fleetOf(t, 3)
	open, err := ms[2].Enter(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	switched := make(chan error, 1)
	go func() {
		_, err := ms[0].Switch(ctxFor(t, 20*time.Second), "b", fleet.AnyVersion)
		switched <- err
	}()
	// The other members let go and wait; a new pass on the open member waits too.
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-switched:
		t.Fatalf("the switch finished while a pass of the old mode was open: %v", err)
	default:
	}
	if _, err := ms[1].Enter(ctxFor(t, 200*time.Millisecond)); !errors.Is(err, fleet.ErrSwitching) {
		t.Fatalf("Enter during a switch = %v, want ErrSwitching after waiting", err)
	}
	if cur, _ := ms[1].Current(ctxFor(t, 5*time.Second)); cur.Name != "a" {
		t.Fatalf("the mode is %q before the open pass ended, want a", cur.Name)
	}
	open.Exit()
	if err := <-switched; err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		p, err := m.Enter(ctxFor(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if p.Mode().Name != "b" || p.Mode().Version != 1 {
			t.Errorf("after the switch a member runs %+v, want b at version 1", p.Mode())
		}
		p.Exit()
	}
	infos, err := ms[0].Members(ctxFor(t, 5*time.Second))
	if err != nil || len(infos) != 3 {
		t.Fatalf("members = %v, %v; want 3", infos, err)
	}
}

// Switches through every member at once are served one after another; each is written, with
// versions that count every one.
func TestConcurrentSwitchesAreSerializedAndNoneIsLost(t *testing.T) {
	_, ms := fleetOf(t, 3)
	var wg sync.WaitGroup
	got := make([]fleet.Mode, 6)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			to := modes[1+i%2]
			mode, err := ms[i%3].Switch(ctxFor(t, 30*time.Second), to, fleet.AnyVersion)
			if err != nil {
				t.Error(err)
			}
			got[i] = mode
		}()
	}
	wg.Wait()
	final, err := ms[0].Current(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int32]bool{}
	for _, m := range got {
		seen[m.Version] = true
	}
	// Each switch that changed the mode bumped the version once; one that found its mode in
	// force changed nothing. The final version is the number of changes, all distinct.
	if int(final.Version) > len(got) || final.Version < 1 {
		t.Fatalf("final version %d after %d switches", final.Version, len(got))
	}
	if !seen[final.Version] {
		t.Errorf("no switch answered the final version %d: %v", final.Version, got)
	}
}

// A switch with an expected version is a compare-and-set.
func TestSwitchWithAStaleVersionChangesNothing(t *testing.T) {
	_, ms := fleetOf(t, 1)
	if _, err := ms[0].Switch(ctxFor(t, 10*time.Second), "b", 0); err != nil {
		t.Fatal(err)
	}
	_, err := ms[0].Switch(ctxFor(t, 10*time.Second), "c", 0)
	if !errors.Is(err, fleet.ErrVersionConflict) {
		t.Fatalf("switch with version 0 after one switch = %v, want ErrVersionConflict", err)
	}
	if cur, _ := ms[0].Current(ctxFor(t, 5*time.Second)); cur.Name != "b" {
		t.Fatalf("mode %q after a refused switch, want b", cur.Name)
	}
}

// A pass that stays open past the bound makes the switch give up; the mode is unchanged and the
// fleet serves again.
func TestSwitchThatCannotDrainGivesUpAndChangesNothing(t *testing.T) {
	root := newRoot(t)
	short := func(c *fleet.Config) { c.SwitchTimeout = time.Second }
	a := join(t, root, "m1", testenv.ZKServers(t), short)
	b := join(t, root, "m2", testenv.ZKServers(t), short)
	open, err := b.Enter(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Exit()
	_, err = a.Switch(ctxFor(t, 10*time.Second), "c", fleet.AnyVersion)
	if !errors.Is(err, fleet.ErrSwitchTimeout) {
		t.Fatalf("switch with a pass open past the bound = %v, want ErrSwitchTimeout", err)
	}
	for _, m := range []member{a, b} {
		// b, whose pass is still open, serves again too: the switch that waited is gone, and
		// the mode cannot have changed under its hold.
		p, err := m.Enter(ctxFor(t, 5*time.Second))
		if err != nil {
			t.Fatalf("after a failed switch a member does not serve again: %v", err)
		}
		if p.Mode().Name != "a" {
			t.Errorf("mode %q after a failed switch, want a", p.Mode().Name)
		}
		p.Exit()
	}
	select {
	case <-open.Lost():
		t.Fatal("the open pass was lost by a switch that gave up")
	default:
	}
}

// A member that leaves with a pass still open (Close gave up waiting) revokes it before its hold
// goes: a switch may go through at once, so the pass must no longer commit.
func TestLeavingWithAPassOpenRevokesIt(t *testing.T) {
	_, ms := fleetOf(t, 2)
	open, err := ms[1].Enter(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Exit()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := ms[1].Close(ctx); err == nil {
		t.Fatal("Close with a pass open past its bound did not say so")
	}
	select {
	case <-open.Lost():
	default:
		t.Fatal("a pass left open by a member that left is still valid")
	}
	if open.Context().Err() == nil {
		t.Fatal("the pass's context is not cancelled")
	}
	if _, err := ms[0].Switch(ctxFor(t, 10*time.Second), "b", fleet.AnyVersion); err != nil {
		t.Fatalf("switch after the member left: %v", err)
	}
}

// A mode that a member cannot run is refused before the barrier, whoever is asked.
func TestSwitchToAModeAMemberCannotRunIsRefused(t *testing.T) {
	root := newRoot(t)
	a := join(t, root, "m1", testenv.ZKServers(t), nil)
	join(t, root, "m2", testenv.ZKServers(t), func(c *fleet.Config) { c.Modes = []string{"a", "b"} })
	_, err := a.Switch(ctxFor(t, 10*time.Second), "c", fleet.AnyVersion)
	if !errors.Is(err, fleet.ErrCannotRun) {
		t.Fatalf("switch to a mode m2 cannot run = %v, want ErrCannotRun", err)
	}
	if cur, _ := a.Current(ctxFor(t, 5*time.Second)); cur.Version != 0 {
		t.Fatalf("a refused switch wrote the mode: %+v", cur)
	}
	// A member that joins a fleet running a mode it cannot run does not admit, and says why.
	if _, err := a.Switch(ctxFor(t, 10*time.Second), "b", fleet.AnyVersion); err != nil {
		t.Fatal(err)
	}
	only := join(t, root, "m3", testenv.ZKServers(t), func(c *fleet.Config) { c.Modes = []string{"a"} })
	if _, err := only.Enter(ctxFor(t, time.Second)); !errors.Is(err, fleet.ErrCannotRun) {
		t.Fatalf("Enter on a member that cannot run the fleet's mode = %v, want ErrCannotRun", err)
	}
	if err := only.Status(); !errors.Is(err, fleet.ErrCannotRun) {
		t.Fatalf("Status = %v, want ErrCannotRun", err)
	}
}

// A member cut off from ZooKeeper (a black hole: the connection stays open, nothing arrives)
// loses its hold within dlock's bound: its open pass says Lost, it admits nothing (ErrNotMember),
// and a switch through another member goes through once ZooKeeper has ended its session. Healed,
// it rejoins in the new mode.
func TestMemberCutOffLosesItsPassAndRejoinsInTheNewMode(t *testing.T) {
	root := newRoot(t)
	servers := testenv.ZKServers(t)
	proxy := tcpproxy.New(t, servers[0])
	a := join(t, root, "m1", servers, nil)
	cut := join(t, root, "m2", []string{proxy.Addr()}, nil)
	open, err := cut.Enter(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Stall()
	switched := make(chan error, 1)
	go func() {
		_, err := a.Switch(ctxFor(t, 30*time.Second), "b", fleet.AnyVersion)
		switched <- err
	}()
	// Status judges the hold when asked: its first answer after the session's deadline comes
	// before the hold's watcher has run, and must still say why (the nemesis saw replicas answer
	// "fleet: not a member now: ...: %!w(<nil>)" right after a pause).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		err := cut.Status()
		if err == nil {
			if time.Now().After(deadline) {
				t.Fatal("the cut-off member still serves after its session")
			}
			continue
		}
		if !errors.Is(err, fleet.ErrNotMember) || !errors.Is(err, dlock.ErrLost) || strings.Contains(err.Error(), "%!") {
			t.Fatalf("Status of a member just cut off = %v, want ErrNotMember saying the lease was lost", err)
		}
		break
	}
	select {
	case <-open.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the cut-off member's pass was not lost within its session")
	}
	// Once the hold's watcher has run, its reason already names ErrNotMember: the answer says so
	// once (the nemesis's logs read "fleet: not a member now: ...: fleet: not a member now: ...").
	once := func(err error) bool { return strings.Count(err.Error(), fleet.ErrNotMember.Error()) == 1 }
	// Asked for a second, the answers span the lost hold and the rejoining that follows it.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, err := cut.Enter(ctxFor(t, time.Second)); !errors.Is(err, fleet.ErrNotMember) || !once(err) {
			t.Fatalf("Enter on a cut-off member = %v, want ErrNotMember at once, named once", err)
		}
		if err := cut.Status(); !errors.Is(err, fleet.ErrNotMember) || !once(err) {
			t.Fatalf("Status of a cut-off member = %v, want ErrNotMember, named once", err)
		}
	}
	if err := <-switched; err != nil {
		t.Fatalf("switch beside a cut-off member: %v", err)
	}
	open.Exit()
	proxy.Resume()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := cut.Enter(ctxFor(t, 5*time.Second))
		if err == nil {
			if p.Mode().Name != "b" {
				t.Fatalf("rejoined in %q, want b", p.Mode().Name)
			}
			p.Exit()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member did not rejoin after the cut healed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The barrier under load: members admit passes at random from many goroutines while switches
// go through random members; no pass of one mode may overlap in time a pass of another. The
// intervals are taken on this process's monotonic clock, one clock for every member.
func TestNoPassesOfTwoModesOverlap(t *testing.T) {
	_, ms := fleetOf(t, 3)
	type interval struct {
		mode       string
		start, end time.Duration
	}
	origin := time.Now()
	var (
		mu    sync.Mutex
		spans []interval
	)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				p, err := ms[w%3].Enter(ctx)
				if err != nil {
					continue
				}
				start := time.Since(origin)
				time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond) // longer than a hand-over of the barrier
				end := time.Since(origin)
				p.Exit()
				admitted.Add(1)
				mu.Lock()
				spans = append(spans, interval{p.Mode().Name, start, end})
				mu.Unlock()
			}
		}()
	}
	switches := 0
	for ctx.Err() == nil {
		to := modes[rand.IntN(len(modes))]
		if _, err := ms[rand.IntN(3)].Switch(ctx, to, fleet.AnyVersion); err == nil {
			switches++
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	if switches < 5 || admitted.Load() < 100 {
		t.Fatalf("too little happened to judge: %d switches, %d passes", switches, admitted.Load())
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.mode != b.mode && a.start < b.end && b.start < a.end {
				t.Fatalf("a pass of %q [%v, %v] overlaps one of %q [%v, %v]", a.mode, a.start, a.end, b.mode, b.start, b.end)
			}
		}
	}
	t.Logf("%d switches, %d passes, none of two modes overlapping", switches, admitted.Load())
}

// NoDrain, a planted mistake for the checker's controls, is refused by a build without the
// zkstock_lies tag: no user of the package can switch without the barrier by setting a field.
func TestNoDrainNeedsThePlantedBuild(t *testing.T) {
	_, err := fleet.Join(nil, fleet.Config{Root: "/zkstock-test/fleets/nodrain", ID: "m1", Seed: "a", Modes: []string{"a"}, NoDrain: true})
	if fleet.NoDrainPlantable {
		t.Skip("built with zkstock_lies")
	}
	if err == nil {
		t.Fatal("Join took NoDrain in a build without the zkstock_lies tag")
	}
}
