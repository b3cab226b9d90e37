package dlock

import (
	"fmt"
	"testing"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

// The trimmed blockers answer as the whole slice of blockers did (popBlocker before them): the
// nearest one, how many are left, and whether the queue must be read again, for every queue length
// and every number of pops that can happen between two reads of the queue.
func TestBlockersAnswerAsTheWholeQueue(t *testing.T) {
	for n := 0; n <= 6; n++ {
		all := make([]nodename.Node, n)
		for i := range all {
			all[i] = nodename.Node{Name: fmt.Sprintf("n-%010d", i), Seq: int64(i)}
		}
		whole := append([]nodename.Node(nil), all...)
		b := nearestBlockers(all)
		for {
			if b.count != len(whole) {
				t.Fatalf("n=%d: count %d, whole %d", n, b.count, len(whole))
			}
			if len(whole) == 0 {
				break
			}
			if b.nearest() != whole[len(whole)-1] {
				t.Fatalf("n=%d: nearest %v, whole's %v", n, b.nearest(), whole[len(whole)-1])
			}
			whole = whole[:len(whole)-1]
			wantRead := len(whole) > 1
			if got := b.pop(); got != wantRead {
				t.Fatalf("n=%d: pop says read again %v, want %v", n, got, wantRead)
			}
			if wantRead {
				break // the waiter reads the queue again: a fresh nearestBlockers
			}
		}
	}
}
