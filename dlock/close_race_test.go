package dlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// A client closed while its locks are creating their lock paths: go-zookeeper's CreateContainer
// read its reply while the connection's reader decoded it (a data race, seen in make test's
// TestHeldCommitKeepsTheLock). Under -race this fails on a client that closes its connection with
// a container create in flight.
func TestCloseWhileLockPathsAreCreated(t *testing.T) {
	servers := testenv.ZKServers(t)
	for round := range 30 {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		c, err := dlock.Connect(ctx, servers, dlock.WithLogger(testLogger()))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				path := fmt.Sprintf("/dlock-test/closerace/%s/r%d/p%d/x", t.Name(), round, i)
				if l, err := dlock.NewMutex(c, path).Lock(ctx); err == nil {
					_ = l.Unlock(context.Background())
				}
			}()
		}
		time.Sleep(time.Duration(round%6) * time.Millisecond)
		_ = c.Close()
		wg.Wait()
	}
}
