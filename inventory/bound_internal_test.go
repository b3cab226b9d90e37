package inventory

import (
	"context"
	"testing"
	"time"
)

// CommitBound counts on the wait_timeout the server applies to a transaction's session, read back
// from it, not on the one Open asks for in the DSN: a session that runs with a longer one (a
// server or proxy in between that set its own) keeps a COMMIT able to apply for longer.
func TestCommitBoundReadsWaitTimeoutBack(t *testing.T) {
	for _, mode := range []Mode{Unfenced, ForUpdate} { // a pipelined sale, and one through inTx
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			s := onePoolStore(t, "WT-1", 10)
			// The pool's one connection, which the sale below runs on.
			if _, err := s.sqlDB.ExecContext(ctx, "SET SESSION wait_timeout = 40"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Deduct(ctx, Purchase{SKU: "WT-1", Qty: 1, RequestID: "K-WT"}, mode, Hooks{}); err != nil {
				t.Fatal(err)
			}
			if got := s.CommitBound(); got < 40*time.Second {
				t.Fatalf("CommitBound %v after a sale on a session with wait_timeout 40 s", got)
			}
		})
	}
}
