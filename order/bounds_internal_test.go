package order

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/sale"
)

// With the defaults, a switch of the fleet's mode behind a wedged change waits well under a
// minute, and no answer is cut off by the HTTP server's WriteTimeout (the engine's own bound,
// LongestChange, is sale's TestDefaultBoundsAreSmall).
func TestDefaultShellBoundsAreSmall(t *testing.T) {
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
	s := &Server{cfg: cfg, src: st, sales: sale.New(sale.Config{LockTimeout: cfg.LockTimeout, WorkDelay: cfg.WorkDelay}, st, nil, nil)}

	longest, sw := s.sales.LongestChange(), s.switchBound()
	t.Logf("defaults: longest change %v, switch bound %v, HTTP WriteTimeout %v", longest, sw, writeTimeout(longest))
	if bound := time.Minute; sw > bound {
		t.Errorf("switchBound with the defaults is %v, want at most %v", sw, bound)
	}
	if want := longest + cfg.ZKSessionTimeout; sw != want {
		t.Errorf("switchBound %v, want the longest change and the session timeout, %v", sw, want)
	}
	if wt := writeTimeout(longest); wt < longest {
		t.Errorf("HTTP WriteTimeout %v is shorter than the longest change %v: its answer would be cut off", wt, longest)
	}
}
