package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// CommitUnanswered is the error of a change whose COMMIT went unanswered; errors.Is(err,
// ErrOutcomeUnknown) holds for it. It names what a resolver needs to decide the outcome of this
// attempt alone: the server's id of the transaction's connection, so that the transaction can be
// ended (EndTransaction) before its key is looked up, the ids of the orders it inserted, the
// only orders under its key that are its own (another request with the same key, retried where
// no lock keeps it out, may have recorded the key's order after this one rolled back), and the
// stock its writes left: if it applied, that is the stock right after it, which a look-up made
// later cannot tell, as other changes may have come between.
type CommitUnanswered struct {
	Conn   int64            // CONNECTION_ID() of the transaction's connection; 0 when not known
	Orders []int64          // the ids of the orders the transaction inserted; nil when not known
	Left   map[string]int64 // the stock per SKU its writes left; nil when not known
	// CancelAttempt names the cancellation that went unanswered (Order.CancelAttempt): the order
	// found cancelled by another was cancelled by another attempt (a retry where no lock keeps
	// it out).
	CancelAttempt string
	err           error
}

func (e *CommitUnanswered) Error() string { return e.err.Error() }
func (e *CommitUnanswered) Unwrap() error { return e.err }

// unanswered wraps the error of an unanswered COMMIT on the connection conn.
func unanswered(err error, conn int64) error {
	var cu *CommitUnanswered
	if errors.As(err, &cu) {
		return err
	}
	return &CommitUnanswered{Conn: conn, err: err}
}

// withAttempt records in err, if its COMMIT went unanswered, what its transaction wrote: the
// orders it inserted and the stock it left.
func withAttempt(err error, orders []Order, left map[string]int64) error {
	var cu *CommitUnanswered
	if !errors.As(err, &cu) {
		return err
	}
	if cu.Orders == nil {
		for _, o := range orders {
			cu.Orders = append(cu.Orders, o.ID)
		}
	}
	if cu.Left == nil {
		cu.Left = left
	}
	return err
}

// CancelledBy says whether the unanswered cancellation of cause is the one that marked o
// cancelled, and then the stock it left o's SKU with; known is false when cause does not say.
func CancelledBy(cause error, o Order) (left int64, made, known bool) {
	var cu *CommitUnanswered
	if !errors.As(cause, &cu) || cu.CancelAttempt == "" {
		return 0, false, false
	}
	left, known = cu.Left[o.SKU]
	return left, known && o.CancelledAt != nil && cu.CancelAttempt == o.CancelAttempt, known
}

// LeftBy is the stock the unanswered attempt of cause left sku with, if it applied; known is
// false when cause does not say.
func LeftBy(cause error, sku string) (left int64, known bool) {
	var cu *CommitUnanswered
	if !errors.As(cause, &cu) {
		return 0, false
	}
	left, known = cu.Left[sku]
	return left, known
}

// MadeBy says whether the order with this id is one that the unanswered attempt of cause
// inserted; known is false when cause does not say which orders those were.
func MadeBy(cause error, id int64) (made, known bool) {
	var cu *CommitUnanswered
	if !errors.As(cause, &cu) || cu.Orders == nil {
		return false, false
	}
	return slices.Contains(cu.Orders, id), true
}

// UnansweredConn is the server's id of the connection whose COMMIT went unanswered in cause; 0
// when not known.
func UnansweredConn(cause error) int64 {
	var cu *CommitUnanswered
	if errors.As(cause, &cu) {
		return cu.Conn
	}
	return 0
}

// sessionColumns read, in a transaction's first round trip, the connection's id, which ends the
// transaction when its COMMIT goes unanswered, and its wait_timeout, which CommitBound counts on.
const sessionColumns = "CONNECTION_ID(), @@SESSION.wait_timeout"

// noteSession keeps the longest wait_timeout a session of the pool reported, as the server has it,
// whatever the DSN asked for: a server or a proxy in between may not have applied that.
func (s *Store) noteSession(waitTimeout int64) {
	for {
		seen := s.waitTimeout.Load()
		if waitTimeout <= seen || s.waitTimeout.CompareAndSwap(seen, waitTimeout) {
			return
		}
	}
}

// readSession reads the transaction's connection id and notes its wait_timeout.
func (s *Store) readSession(tx *gorm.DB) (int64, error) {
	var id, waitTimeout int64
	if err := tx.Raw("SELECT "+sessionColumns).Row().Scan(&id, &waitTimeout); err != nil {
		return 0, fmt.Errorf("read the session: %w", err)
	}
	s.noteSession(waitTimeout)
	return id, nil
}

// EndTransaction ends the transaction on the server's connection conn, whose COMMIT went
// unanswered, and waits until the server has let the connection go. A COMMIT the server has yet
// to act on (held up in the network, or waiting behind BACKUP STAGE BLOCK_COMMIT or FLUSH TABLES
// WITH READ LOCK) is then never applied, and one already applying has finished: either way the
// orders under the transaction's key are final, and a look-up of the key decides the outcome. A
// transaction the server cannot stop (a COMMIT inside an fsync) lives on until it is done: the
// error then says ctx ended first.
func (s *Store) EndTransaction(ctx context.Context, conn int64) error {
	if conn == 0 {
		return errors.New("inventory: end transaction: its connection is not known")
	}
	var me *mysql.MySQLError
	if _, err := s.sqlDB.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", conn)); err != nil &&
		!(errors.As(err, &me) && me.Number == 1094) { // 1094: no such thread, so it ended already
		return fmt.Errorf("inventory: end transaction on connection %d: %w", conn, err)
	}
	for {
		alive, err := s.ConnectionAlive(ctx, conn)
		if err != nil || !alive {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("inventory: connection %d still open after KILL: %w", conn, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ConnectionAlive says whether the server still has the connection conn: while it has, a
// transaction on it may still commit.
func (s *Store) ConnectionAlive(ctx context.Context, conn int64) (bool, error) {
	var one int
	err := s.sqlDB.QueryRowContext(ctx, "SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = ?", conn).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("inventory: is connection %d open: %w", conn, err)
	}
	return true, nil
}
