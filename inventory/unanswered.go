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
// attempt alone: the transaction's connection, so that the transaction can be ended
// (EndTransaction) before its key is looked up, the ids of the orders it inserted, the
// only orders under its key that are its own (another request with the same key, retried where
// no lock keeps it out, may have recorded the key's order after this one rolled back), and the
// stock its writes left: if it applied, that is the stock right after it, which a look-up made
// later cannot tell, as other changes may have come between.
type CommitUnanswered struct {
	Conn   ServerConn       // the transaction's connection; its ID is 0 when not known
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
func unanswered(err error, conn ServerConn) error {
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

// UnansweredConn is the connection whose COMMIT went unanswered in cause; its ID is 0 when not
// known.
func UnansweredConn(cause error) ServerConn {
	var cu *CommitUnanswered
	if errors.As(cause, &cu) {
		return cu.Conn
	}
	return ServerConn{}
}

// sessionColumns read, in a transaction's first round trip, the connection's id and its server's
// run (ServerConn), which end the transaction when its COMMIT goes unanswered, and its
// wait_timeout, which CommitBound counts on.
const sessionColumns = "CONNECTION_ID(), " + runColumn + ", @@SESSION.wait_timeout"

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

// readSession reads the transaction's connection and notes its wait_timeout.
func (s *Store) readSession(tx *gorm.DB) (ServerConn, error) {
	conn := ServerConn{Addr: s.addr}
	var run sql.NullString
	var waitTimeout int64
	if err := tx.Raw("SELECT "+sessionColumns).Row().Scan(&conn.ID, &run, &waitTimeout); err != nil {
		return ServerConn{}, fmt.Errorf("read the session: %w", err)
	}
	q, ok := tx.Statement.ConnPool.(querier)
	if !ok {
		return ServerConn{}, errors.New("read the session: the transaction runs on no connection")
	}
	var err error
	if conn.Run, err = runMark(tx.Statement.Context, q, run); err != nil {
		return ServerConn{}, fmt.Errorf("read the session: %w", err)
	}
	s.noteSession(waitTimeout)
	return conn, nil
}

// EndTransaction ends the transaction on the server's connection conn, whose COMMIT went
// unanswered, and waits until the server has let the connection go. A COMMIT the server has yet
// to act on (held up in the network, or waiting behind BACKUP STAGE BLOCK_COMMIT or FLUSH TABLES
// WITH READ LOCK) is then never applied, and one already applying has finished: either way the
// orders under the transaction's key are final, and a look-up of the key decides the outcome. A
// server that has started again since conn was opened has ended it already, and the connection
// that now has its id, another's, is left alone. A transaction the server cannot stop (a COMMIT
// inside an fsync) lives on until it is done: the error then says ctx ended first.
//
// It needs no privilege but the service's own: a user may KILL, and see in PROCESSLIST, its own
// connections (every replica connects as the same user).
func (s *Store) EndTransaction(ctx context.Context, conn ServerConn) error {
	var me *mysql.MySQLError
	gone, err := s.onRunOf(ctx, conn, func(c *sql.Conn) error {
		if _, err := c.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", conn.ID)); err != nil &&
			!(errors.As(err, &me) && me.Number == 1094) { // 1094: no such thread, so it ended already
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("inventory: end transaction on connection %d: %w", conn.ID, err)
	}
	for !gone {
		select {
		case <-ctx.Done():
			return fmt.Errorf("inventory: connection %d still open after KILL: %w", conn.ID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		alive, err := s.ConnectionAlive(ctx, conn)
		if err != nil {
			return err
		}
		gone = !alive
	}
	return nil
}

// ConnectionAlive says whether the server still has the connection conn: while it has, a
// transaction on it may still commit. A connection of an earlier run of the server is gone.
func (s *Store) ConnectionAlive(ctx context.Context, conn ServerConn) (bool, error) {
	alive := false
	gone, err := s.onRunOf(ctx, conn, func(c *sql.Conn) error {
		var one int
		err := c.QueryRowContext(ctx, "SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = ?", conn.ID).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		alive = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("inventory: is connection %d open: %w", conn.ID, err)
	}
	return alive && !gone, nil
}
