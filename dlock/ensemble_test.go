package dlock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

func TestMutexOnEnsemble(t *testing.T) {
	ensemble := testenv.ZKEnsemble(t)
	path := testenv.UniquePath(t)
	var ex exclusion
	var wg sync.WaitGroup
	var last int64
	var mu sync.Mutex
	// One client per peer, so that the lock's order crosses servers.
	for _, server := range ensemble {
		m := dlock.NewMutex(connect(t, []string{server}), path)
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < 15; r++ {
					l, err := m.Lock(ctxTimeout(t, time.Minute))
					if err != nil {
						t.Errorf("lock: %v", err)
						return
					}
					ex.enter()
					mu.Lock()
					if l.Token() <= last {
						t.Errorf("token %d not above %d", l.Token(), last)
					}
					last = l.Token()
					mu.Unlock()
					ex.leave()
					mustUnlock(t, l)
				}
			}()
		}
	}
	wg.Wait()
	if ex.overlaps.Load() != 0 {
		t.Fatalf("%d overlaps on the ensemble", ex.overlaps.Load())
	}
}

// A lease held idle is kept, whichever peer the client talks to: on a follower only the client's
// own syncs prove the session alive at the leader (no lock is taken or released meanwhile), and
// they must come often enough that a healthy session never looks lost.
func TestIdleLeaseOnEnsembleIsKept(t *testing.T) {
	const session = 2 * time.Second
	ensemble := testenv.ZKEnsemble(t)
	var wg sync.WaitGroup
	for _, server := range ensemble {
		c := connect(t, []string{server}, dlock.WithSessionTimeout(session))
		l, err := dlock.NewMutex(c, testenv.UniquePath(t)).Lock(ctxTimeout(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-l.Lost():
				t.Errorf("lease held idle through %s lost: %v", server, l.Err())
			case <-time.After(3 * session):
			}
			mustUnlock(t, l)
		}()
	}
	wg.Wait()
}
