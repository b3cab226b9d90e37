package teaching_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/teaching"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, "ZK_SERVERS") }

// contender is one session's way to take a lock, whichever recipe, and its counters.
type contender struct {
	lock  func(ctx context.Context) (unlock func() error, err error)
	stats func() dlock.Stats
}

// variants are the teaching recipes, and dlock's fair Mutex to measure them against.
var variants = []struct {
	name string
	new  func(t *testing.T, path string) contender
}{
	{"spin", teachingVariant(func(c *teaching.Client, p string) teaching.Locker {
		return teaching.NewSpinLock(c, p, 5*time.Millisecond)
	})},
	{"node-watch", teachingVariant(func(c *teaching.Client, p string) teaching.Locker { return teaching.NewNodeWatchLock(c, p) })},
	{"herd", teachingVariant(func(c *teaching.Client, p string) teaching.Locker { return teaching.NewHerdLock(c, p) })},
	{"fair", func(t *testing.T, p string) contender {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		c, err := dlock.Connect(ctx, testenv.ZKServers(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		m := dlock.NewMutex(c, p)
		return contender{func(ctx context.Context) (func() error, error) {
			l, err := m.Lock(ctx)
			if err != nil {
				return nil, err
			}
			return func() error { return l.Unlock(context.Background()) }, nil
		}, c.Stats}
	}},
}

func teachingVariant(newLocker func(*teaching.Client, string) teaching.Locker) func(*testing.T, string) contender {
	return func(t *testing.T, p string) contender {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		c, err := teaching.Connect(ctx, testenv.ZKServers(t), 10*time.Second, "test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		l := newLocker(c, p)
		return contender{func(ctx context.Context) (func() error, error) {
			lease, err := l.Lock(ctx)
			if err != nil {
				return nil, err
			}
			return func() error { return lease.Unlock(context.Background()) }, nil
		}, c.Stats}
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func children(t *testing.T, path string) []string {
	t.Helper()
	conn, _, err := zk.Connect(testenv.ZKServers(t), 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kids, _, err := conn.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return kids
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func TestEveryVariantExcludes(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			path := testenv.UniquePath(t)
			var inside, overlaps atomic.Int32
			var wg sync.WaitGroup
			for range 4 {
				c := v.new(t, path)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 15 {
						unlock, err := c.lock(ctxTimeout(t, time.Minute))
						if err != nil {
							t.Errorf("lock: %v", err)
							return
						}
						if inside.Add(1) != 1 {
							overlaps.Add(1)
						}
						time.Sleep(time.Millisecond)
						inside.Add(-1)
						if err := unlock(); err != nil {
							t.Errorf("unlock: %v", err)
						}
					}
				}()
			}
			wg.Wait()
			if overlaps.Load() != 0 {
				t.Fatalf("%d overlaps", overlaps.Load())
			}
			if nodes := children(t, path); len(nodes) != 0 {
				t.Fatalf("nodes left: %v", nodes)
			}
		})
	}
}

// wakeupsPerRelease queues n waiters behind one holder, releases them one by one, and returns the
// watch notifications all waiters received per release.
func wakeupsPerRelease(t *testing.T, newContender func(*testing.T, string) contender, n int) float64 {
	t.Helper()
	path := testenv.UniquePath(t)
	unlockHolder, err := newContender(t, path).lock(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var waiters []contender
	got := make(chan func() error, n)
	for range n {
		c := newContender(t, path)
		waiters = append(waiters, c)
		go func() {
			unlock, err := c.lock(ctxTimeout(t, time.Minute))
			if err != nil {
				t.Errorf("lock: %v", err)
			}
			got <- unlock
		}()
	}
	time.Sleep(500 * time.Millisecond) // let every waiter queue and watch
	events := func() (sum int64) {
		for _, c := range waiters {
			sum += c.stats().WatchEvents
		}
		return sum
	}
	before := events()
	if err := unlockHolder(); err != nil {
		t.Fatal(err)
	}
	for range n {
		unlock := <-got
		if unlock == nil {
			t.FailNow()
		}
		time.Sleep(30 * time.Millisecond) // a short hold, so that the losers watch again
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
	}
	return float64(events()-before) / float64(n)
}

// The herd recipes wake more waiters per release as the queue grows; the fair lock wakes one.
func TestWakeupsGrowWithWaitersExceptFair(t *testing.T) {
	for _, v := range variants {
		if v.name == "spin" {
			continue // no watches at all: it polls instead
		}
		t.Run(v.name, func(t *testing.T) {
			small := wakeupsPerRelease(t, v.new, 3)
			large := wakeupsPerRelease(t, v.new, 12)
			t.Logf("%s: %.2f wake-ups per release with 3 waiters, %.2f with 12", v.name, small, large)
			switch v.name {
			case "fair":
				if small > 1 || large > 1 {
					t.Fatalf("fair lock woke more than one waiter per release: %.2f, %.2f", small, large)
				}
			default:
				if large <= small || large <= 2 {
					t.Fatalf("%s: wake-ups per release did not grow with the queue: %.2f → %.2f", v.name, small, large)
				}
			}
		})
	}
}

func TestVariantsCleanUpOnCancel(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			path := testenv.UniquePath(t)
			unlock, err := v.new(t, path).lock(ctxTimeout(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if _, err := v.new(t, path).lock(ctx); err == nil {
				t.Fatal("acquired a held lock")
			}
			if err := unlock(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for len(children(t, path)) != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%s: nodes left after a cancelled lock: %v", v.name, children(t, path))
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// A herd waiter and a dlock waiter queue in one line: the teaching recipe reads and writes names
// by dlock's rules.
func TestHerdQueuesWithMutex(t *testing.T) {
	path := testenv.UniquePath(t)
	herd := variants[2].new(t, path)
	fair := variants[3].new(t, path)
	unlock, err := herd.lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fair.lock(ctxTimeout(t, 300*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dlock while the herd lock holds: %v, want it to wait", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	unlockFair, err := fair.lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := herd.lock(ctxTimeout(t, 300*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("herd lock while dlock holds: %v, want it to wait", err)
	}
	if err := unlockFair(); err != nil {
		t.Fatal(err)
	}

}
