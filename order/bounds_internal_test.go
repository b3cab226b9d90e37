package order

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// With the defaults, a change is bounded by the sum of its bounds, each counted once, and that sum
// is small: a switch of the fleet's mode behind a wedged change, and a shutdown, wait well under
// a minute, not a read timeout for every round trip a change could make (17 minutes).
func TestDefaultBoundsAreSmall(t *testing.T) {
	ctx := context.Background()
	cfg, err := LoadConfig(nil, func(name string) string {
		if name == "ZK_OPEN_ACL" {
			return "true"
		}
		return ""
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	st, err := inventory.Open(ctx, testenv.MySQLDatabase(t), inventory.PoolOptions{}) // the DSN sets no readTimeout: the default
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s := &Server{cfg: cfg, store: st}

	longest, sw := s.longestChange(), s.switchBound()
	t.Logf("defaults: longest change %v, switch bound %v, shutdown %v, HTTP WriteTimeout %v", longest, sw, longest, writeTimeout(longest))
	if want := cfg.LockTimeout + s.txBudget() + st.ReadTimeout() + s.settleBound() + releaseTimeout; longest != want {
		t.Errorf("longestChange %v, want LOCK_TIMEOUT + the transaction budget + one round trip + settleBound + the release = %v", longest, want)
	}
	if bound := 50 * time.Second; longest > bound {
		t.Errorf("longestChange with the defaults is %v, want at most %v", longest, bound)
	}
	if bound := time.Minute; sw > bound {
		t.Errorf("switchBound with the defaults is %v, want at most %v", sw, bound)
	}
	if wt := writeTimeout(longest); wt < longest {
		t.Errorf("HTTP WriteTimeout %v is shorter than the longest change %v: its answer would be cut off", wt, longest)
	}
	// zk-batch: a batch (its lease's wait, its transaction, its settle and its release; shutdown
	// waits for it as long as for a change) and so the purchases it answers are within the bound.
	if batch := cfg.LockTimeout + s.batchBound() + s.settleBound() + releaseTimeout; batch > longest {
		t.Errorf("a batch may take %v, more than the longest change %v", batch, longest)
	}
}
