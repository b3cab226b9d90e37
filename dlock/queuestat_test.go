package dlock_test

import (
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// QueueStat counts a queue's holder and waiters, and its moves: with one holder there, two more
// joining and two leaving are four moves, of which (4 - 0) / 2 = 2 left. A path never made holds no one.
func TestQueueStat(t *testing.T) {
	servers := testenv.ZKServers(t)
	c := connect(t, servers)
	path := testenv.UniquePath(t)
	if st, err := c.QueueStat(ctxTimeout(t, 5*time.Second), path); err != nil || st != (dlock.QueueStat{}) {
		t.Fatalf("a path never made: %+v, %v; want no one", st, err)
	}
	holder, err := dlock.NewMutex(c, path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.QueueStat(ctxTimeout(t, 5*time.Second), path)
	if err != nil || before.Contenders != 1 {
		t.Fatalf("one holder: %+v, %v", before, err)
	}
	got := make(chan *dlock.Lease, 2)
	for range 2 {
		other := connect(t, servers)
		go func() {
			l, err := dlock.NewMutex(other, path).Lock(ctxTimeout(t, 10*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			got <- l
		}()
	}
	eventually(t, 5*time.Second, "two waiters", func() bool {
		st, err := c.QueueStat(ctxTimeout(t, 5*time.Second), path)
		return err == nil && st.Contenders == 3
	})
	if err := holder.Unlock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	receive := func() *dlock.Lease {
		t.Helper()
		select {
		case l := <-got:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter was not granted the lock")
			return nil
		}
	}
	next := receive()
	if err := next.Unlock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	last := receive()
	after, err := c.QueueStat(ctxTimeout(t, 5*time.Second), path)
	if err != nil {
		t.Fatal(err)
	}
	moves, left := after.Moves-before.Moves, (int(after.Moves-before.Moves)-(after.Contenders-before.Contenders))/2
	if after.Contenders != 1 || moves != 4 || left != 2 {
		t.Fatalf("after 2 joined and 2 left: %+v (from %+v): %d moves, %d left; want 1 contender, 4 moves, 2 left", after, before, moves, left)
	}
	if err := last.Unlock(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}
