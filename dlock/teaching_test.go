package dlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/internal/testenv"
)

// variants are the recipes behind dlock.Locker, by name.
var variants = []struct {
	name string
	new  func(c *dlock.Client, path string) dlock.Locker
}{
	{"spin", func(c *dlock.Client, p string) dlock.Locker { return dlock.NewSpinLock(c, p, 5*time.Millisecond) }},
	{"node-watch", func(c *dlock.Client, p string) dlock.Locker { return dlock.NewNodeWatchLock(c, p) }},
	{"herd", func(c *dlock.Client, p string) dlock.Locker { return dlock.NewHerdLock(c, p) }},
	{"fair", func(c *dlock.Client, p string) dlock.Locker { return dlock.NewMutex(c, p) }},
}

func TestEveryVariantExcludes(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			path := testenv.UniquePath(t)
			var ex exclusion
			var wg sync.WaitGroup
			for i := 0; i < 4; i++ {
				l := v.new(connect(t, testenv.ZKServers(t)), path)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := 0; r < 15; r++ {
						lease, err := l.Lock(ctxTimeout(t, time.Minute))
						if err != nil {
							t.Errorf("lock: %v", err)
							return
						}
						ex.enter()
						time.Sleep(time.Millisecond)
						ex.leave()
						mustUnlock(t, lease)
					}
				}()
			}
			wg.Wait()
			if ex.overlaps.Load() != 0 {
				t.Fatalf("%d overlaps", ex.overlaps.Load())
			}
			if nodes := lockNodes(t, rawConn(t), path); len(nodes) != 0 {
				t.Fatalf("nodes left: %v", nodes)
			}
		})
	}
}

// wakeupsPerRelease queues n waiters behind one holder, releases them one by one, and returns the
// watch notifications all waiters received per release.
func wakeupsPerRelease(t *testing.T, newLocker func(*dlock.Client, string) dlock.Locker, n int) float64 {
	t.Helper()
	path := testenv.UniquePath(t)
	servers := testenv.ZKServers(t)
	holder, err := newLocker(connect(t, servers), path).Lock(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var clients []*dlock.Client
	got := make(chan *dlock.Lease, n)
	for i := 0; i < n; i++ {
		c := connect(t, servers)
		clients = append(clients, c)
		l := newLocker(c, path)
		go func() {
			lease, err := l.Lock(ctxTimeout(t, time.Minute))
			if err != nil {
				t.Errorf("lock: %v", err)
			}
			got <- lease
		}()
	}
	time.Sleep(500 * time.Millisecond) // let every waiter queue and watch
	events := func() (sum int64) {
		for _, c := range clients {
			sum += c.Stats().WatchEvents
		}
		return sum
	}
	before := events()
	mustUnlock(t, holder)
	for i := 0; i < n; i++ {
		l := <-got
		if l == nil {
			t.FailNow()
		}
		time.Sleep(30 * time.Millisecond) // a short hold, so that the losers watch again
		mustUnlock(t, l)
	}
	return float64(events()-before) / float64(n)
}

// The herd variants wake more waiters per release as the queue grows; the fair lock wakes one.
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
			servers := testenv.ZKServers(t)
			held, err := v.new(connect(t, servers), path).Lock(ctxTimeout(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if _, err := v.new(connect(t, servers), path).Lock(ctx); err == nil {
				t.Fatal("acquired a held lock")
			}
			mustUnlock(t, held)
			raw := rawConn(t)
			eventually(t, 5*time.Second, fmt.Sprintf("%s lock path empty", v.name), func() bool { return len(lockNodes(t, raw, path)) == 0 })
		})
	}
}
