package inventory

import (
	"context"
	"fmt"
	"time"
)

// Mode is how a change of stock protects itself; moveStock and claimFences say what each does.
type Mode int

const (
	// Fenced claims the fence before anything else: the change goes ahead only if no newer token
	// of its issuer has been written. Used under a lock that issues tokens.
	Fenced Mode = iota
	// Unfenced trusts the lock alone.
	Unfenced
	// Unsafe is the same plain read-check-write with no lock at all: it oversells under
	// concurrency, which is what the demonstration shows. It must stay a read-modify-write.
	Unsafe
	// ForUpdate locks the product's row with SELECT ... FOR UPDATE before reading it: the
	// database serializes the changes, no lock service involved.
	ForUpdate
	// CAS makes the check and the write one conditional statement:
	// UPDATE products SET stock = stock - qty WHERE sku = ? AND stock >= qty.
	CAS
)

func (m Mode) String() string {
	switch m {
	case Fenced:
		return "fenced"
	case Unfenced:
		return "unfenced"
	case Unsafe:
		return "unsafe"
	case ForUpdate:
		return "for-update"
	case CAS:
		return "cas"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Hooks let the caller act inside the transaction. Either may be nil.
type Hooks struct {
	// Work runs where the mode's critical section is (moveStock): the simulated payment call.
	// An error rolls the transaction back.
	Work func(ctx context.Context) error
	// BeforeCommit is the last word before commit; the caller checks it still holds its lock.
	BeforeCommit func() error
	// Deadline, when set, ends the transaction's statements before its COMMIT, and the work: one
	// cut off by it rolls the transaction back, and no COMMIT is sent once it has passed, so
	// nothing was changed. The COMMIT is not bound by it: it waits as ctx says (commit), and an
	// unanswered one is ErrOutcomeUnknown.
	Deadline time.Time
}

// statements is the context of a transaction's statements and work: ctx, ended at Deadline too.
func (h Hooks) statements(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.Deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, h.Deadline)
}
