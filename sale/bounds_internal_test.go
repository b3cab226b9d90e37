package sale

import (
	"context"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// With the defaults (LOCK_TIMEOUT 5 s, no WORK_DELAY), a change is bounded by the sum of its
// bounds, each counted once, and that sum is small: a switch of the fleet's mode behind a wedged
// change, and a shutdown, wait well under a minute, not a read timeout for every round trip a
// change could make.
func TestDefaultBoundsAreSmall(t *testing.T) {
	ctx := context.Background()
	st, err := inventory.Open(ctx, testenv.MySQLDatabase(t), inventory.PoolOptions{}) // the DSN sets no readTimeout: the default
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e := &Engine{cfg: Config{LockTimeout: 5 * time.Second}, src: st}

	longest := e.LongestChange()
	t.Logf("defaults: longest change %v", longest)
	if want := e.cfg.LockTimeout + e.txBudget() + st.ReadTimeout() + e.settleBound() + releaseTimeout; longest != want {
		t.Errorf("LongestChange %v, want LOCK_TIMEOUT + the transaction budget + one round trip + settleBound + the release = %v", longest, want)
	}
	if bound := 50 * time.Second; longest > bound {
		t.Errorf("LongestChange with the defaults is %v, want at most %v", longest, bound)
	}
	// zk-batch: a batch (its lease's wait, its transaction, its settle and its release; shutdown
	// waits for it as long as for a change) and so the purchases it answers are within the bound.
	if batch := e.cfg.LockTimeout + e.batchBound() + e.settleBound() + releaseTimeout; batch > longest {
		t.Errorf("a batch may take %v, more than the longest change %v", batch, longest)
	}
}
