package dlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// rwParty is one client in a read/write test, with its own session so that its wake-ups show in
// its own Stats.
type rwParty struct {
	c     *dlock.Client
	lease *dlock.Lease
	held  chan struct{}
	done  chan error
}

func startRW(t *testing.T, path string, write bool) *rwParty {
	t.Helper()
	p := &rwParty{c: connect(t, testenv.ZKServers(t)), held: make(chan struct{}), done: make(chan error, 1)}
	rw := dlock.NewRWMutex(p.c, path)
	go func() {
		var err error
		if write {
			p.lease, err = rw.Lock(ctxTimeout(t, time.Minute))
		} else {
			p.lease, err = rw.RLock(ctxTimeout(t, time.Minute))
		}
		if err != nil {
			p.done <- err
			return
		}
		close(p.held)
	}()
	return p
}

func (p *rwParty) isHeld() bool {
	select {
	case <-p.held:
		return true
	default:
		return false
	}
}

func (p *rwParty) waitHeld(t *testing.T, name string) {
	t.Helper()
	select {
	case <-p.held:
	case err := <-p.done:
		t.Fatalf("%s failed: %v", name, err)
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not acquire", name)
	}
}

func (p *rwParty) release(t *testing.T) { t.Helper(); mustUnlock(t, p.lease) }

func TestRWMutexReadersShare(t *testing.T) {
	path := testenv.UniquePath(t)
	var readers []*rwParty
	for i := 0; i < 4; i++ {
		readers = append(readers, startRW(t, path, false))
	}
	for i, r := range readers {
		r.waitHeld(t, "reader "+string(rune('A'+i)))
	}
	for _, r := range readers {
		r.release(t)
	}
}

func TestRWMutexOrderAndWakeups(t *testing.T) {
	path := testenv.UniquePath(t)
	raw := rawConn(t)
	// Queue: R1 R2 W1 R3 R4 R5 W2 R6, each queued only after the one before it.
	var q []*rwParty
	add := func(write bool) *rwParty {
		p := startRW(t, path, write)
		q = append(q, p)
		waitNodes(t, raw, path, len(q))
		return p
	}
	r1, r2 := add(false), add(false)
	w1 := add(true)
	r3, r4, r5 := add(false), add(false), add(false)
	w2 := add(true)
	r6 := add(false)
	r1.waitHeld(t, "R1")
	r2.waitHeld(t, "R2")

	settle := func() { time.Sleep(300 * time.Millisecond) } // time for a wrong wake-up to show
	wakeups := func() []int64 {
		var out []int64
		for _, p := range q {
			out = append(out, p.c.Stats().WatchEvents)
		}
		return out
	}
	settle()
	for i, p := range q[2:] {
		if p.isHeld() {
			t.Fatalf("party %d holds while the first readers do", i+2)
		}
	}

	// The writer waits for both readers ahead of it.
	r1.release(t)
	settle()
	if w1.isHeld() {
		t.Fatal("writer acquired while a reader ahead of it still held")
	}
	r2.release(t)
	w1.waitHeld(t, "W1")
	settle()
	if r3.isHeld() || r4.isHeld() || r5.isHeld() {
		t.Fatal("readers queued behind a writer acquired while it held")
	}

	// Releasing the writer wakes exactly the readers right behind it.
	before := wakeups()
	w1.release(t)
	r3.waitHeld(t, "R3")
	r4.waitHeld(t, "R4")
	r5.waitHeld(t, "R5")
	settle()
	after := wakeups()
	for i := range q {
		woke := after[i] - before[i]
		switch q[i] {
		case r3, r4, r5:
			if woke != 1 {
				t.Errorf("reader %d behind the writer woke %d times, want 1", i, woke)
			}
		default:
			if woke != 0 {
				t.Errorf("party %d woke %d times on the writer's release, want 0", i, woke)
			}
		}
	}
	if w2.isHeld() || r6.isHeld() {
		t.Fatal("W2 or R6 acquired while readers ahead held")
	}
	r3.release(t)
	r4.release(t)
	settle()
	if w2.isHeld() {
		t.Fatal("W2 acquired while R5 held")
	}
	r5.release(t)
	w2.waitHeld(t, "W2")
	settle()
	if r6.isHeld() {
		t.Fatal("R6 acquired while W2 held")
	}
	w2.release(t)
	r6.waitHeld(t, "R6")
	r6.release(t)
	if nodes := lockNodes(t, raw, path); len(nodes) != 0 {
		t.Fatalf("nodes left: %v", nodes)
	}
}

func TestRWMutexWritersExclude(t *testing.T) {
	servers := testenv.ZKServers(t)
	path := testenv.UniquePath(t)
	var readers, writers atomic.Int32
	var bad atomic.Int32
	done := make(chan struct{})
	for i := 0; i < 6; i++ {
		rw := dlock.NewRWMutex(connect(t, servers), path)
		write := i%3 == 0
		go func() {
			defer func() { done <- struct{}{} }()
			for r := 0; r < 15; r++ {
				var l *dlock.Lease
				var err error
				if write {
					l, err = rw.Lock(ctxTimeout(t, time.Minute))
				} else {
					l, err = rw.RLock(ctxTimeout(t, time.Minute))
				}
				if err != nil {
					t.Errorf("lock: %v", err)
					return
				}
				if write {
					if writers.Add(1) != 1 || readers.Load() != 0 {
						bad.Add(1)
					}
					time.Sleep(time.Millisecond)
					writers.Add(-1)
				} else {
					readers.Add(1)
					if writers.Load() != 0 {
						bad.Add(1)
					}
					time.Sleep(time.Millisecond)
					readers.Add(-1)
				}
				_ = l.Unlock(context.Background())
			}
		}()
	}
	for i := 0; i < 6; i++ {
		<-done
	}
	if bad.Load() != 0 {
		t.Fatalf("%d times a writer overlapped another holder", bad.Load())
	}
}
