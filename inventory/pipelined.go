package inventory

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// A sale of one line in a mode that reads plainly (Fenced, Unfenced, Unsafe) is the hot path of
// every lock mode built on a lock service, and inside the lock every round trip to the database
// is time the SKU's next buyer waits. Its statements are the same as any sale's, in the same
// order (sell), but those that need no answer in between travel together, in three round trips
// where there were six. The server runs the statements of one text in order and stops at the
// first error, so
//
//	START TRANSACTION; <claim the fence>; SELECT ROW_COUNT(), <stock and key>
//
// is the first: the claim's row count comes back in the read's row (clientFoundRows makes it the
// rows matched), and the read still comes after the claim, so its snapshot is fixed after the
// claim's row lock was granted. Then the check and the work, in Go, as moveStock does them; then
//
//	<write the stock>; <insert the order>
//
// and the lock's last word; then COMMIT, alone. The COMMIT is not sent with the writes, because
// an unanswered COMMIT is settled by asking for the key's order (ResolveRequest), and that
// answer is final only if the order's row, and its lock on the key, were on the server before
// the COMMIT left: a text that carried the writes and the COMMIT together could still be in
// the network, unseen by the server, when the question is asked, and apply after the answer.
//
// The transaction lives on one connection taken from the pool for the sale, and is ended on
// every path before the connection goes back; a connection whose state is not known (a round
// trip broken, cancelled or cut short by a panic) is discarded, never pooled.

// sellPipelined is sell for one line in a mode that reads plainly.
func (s *Store) sellPipelined(ctx context.Context, sl sale, mode Mode, hooks Hooks) (orders []Order, left map[string]int64, replayed bool, err error) {
	l := sl.req.lines[0]
	stmts, cancel := hooks.statements(ctx) // the COMMIT alone runs under ctx
	defer cancel()
	conn, err := s.sqlDB.Conn(stmts)
	if err != nil {
		return nil, nil, false, fmt.Errorf("connection: %w", err)
	}
	c := &saleConn{conn: conn, store: s, id: ServerConn{Addr: s.addr}}
	defer c.end() // on every path but a COMMIT handed off: that one ends the transaction itself

	stock, known, err := c.claimAndRead(stmts, l.sku, sl, mode)
	if err != nil {
		return nil, nil, false, err
	}
	if known {
		c.end() // the key's orders are committed: they are the answer, read outside this transaction
		return s.replay(stmts, sl.req)
	}
	if stock < l.take {
		return nil, nil, false, &ShortError{SKU: l.sku}
	}
	if err := runWork(stmts, hooks.Work); err != nil {
		return nil, nil, false, err
	}
	o := Order{SKU: l.sku, Qty: l.take, Replica: sl.replica, FenceToken: sl.fences[l.sku].Token, BodyDigest: sl.req.digest, CreatedAt: s.db.NowFunc()}
	if sl.req.key != "" {
		key := sl.req.keyOf(l.sku)
		o.RequestID = &key
	}
	if o.ID, err = c.writeAndRecord(stmts, l.sku, stock-l.take, &o); err != nil {
		err = s.translate(err)
		if errors.Is(err, gorm.ErrDuplicatedKey) && sl.req.key != "" {
			// Another transaction recorded the same key first (possible without a lock): ours
			// is rolled back, theirs is the answer.
			c.end()
			return s.replay(stmts, sl.req)
		}
		return nil, nil, false, fmt.Errorf("write and record %s: %w", l.sku, err)
	}
	if err := beforeCommit(hooks.BeforeCommit); err != nil {
		return nil, nil, false, err
	}
	if err := timeToCommit(stmts); err != nil {
		return nil, nil, false, err
	}
	c.handedOff = true
	if _, err := awaitCommit(ctx, func() (struct{}, error) { return struct{}{}, c.commit(ctx) }); err != nil {
		if !errors.Is(err, ErrOutcomeUnknown) { // rolled back: nothing was sold
			return nil, nil, false, err
		}
		return nil, nil, false, withAttempt(unanswered(err, c.id), []Order{o}, map[string]int64{l.sku: stock - l.take})
	}
	return []Order{o}, map[string]int64{l.sku: stock - l.take}, false, nil
}

// replay answers a request whose key's orders are committed, read outside any transaction.
func (s *Store) replay(ctx context.Context, req keyedRequest) ([]Order, map[string]int64, bool, error) {
	orders, left, found, err := replayOf(s.db.WithContext(ctx), req)
	if err == nil && !found {
		err = fmt.Errorf("the orders of key %q vanished", req.key)
	}
	return orders, left, err == nil, err
}

// saleConn is the connection of one sale and the state of its transaction.
type saleConn struct {
	conn      *sql.Conn
	store     *Store
	id        ServerConn // the connection, read in the first round trip
	open      bool       // START TRANSACTION may have run and no COMMIT or ROLLBACK has ended it
	unsure    bool       // the connection's state is not known: discard it
	handedOff bool       // the COMMIT owns the connection now, and ends it (commit)
	ended     bool
}

// claimAndRead is the first round trip: begin, claim the fence (Fenced), read the stock and
// whether an order holds the key.
func (c *saleConn) claimAndRead(ctx context.Context, sku string, sl sale, mode Mode) (stock int64, known bool, err error) {
	q, args := "START TRANSACTION; ", []any(nil)
	matched := "1"
	if mode == Fenced {
		claim, cargs, err := claimStatement(sku, sl.fences[sku])
		if err != nil {
			return 0, false, err
		}
		q += claim + "; "
		args = cargs
		matched = "ROW_COUNT()" // the claim's: the statement just before
	}
	key := sql.NullString{String: sl.req.key, Valid: !sl.newKey} // NULL matches no order: nothing to look up
	q += "SELECT " + matched + ", " + sessionColumns + ", " + stockAndKeyColumns
	args = append(args, key, sku)
	c.open, c.unsure = true, true
	var claimed, waitTimeout int64
	var run sql.NullString
	err = c.conn.QueryRowContext(ctx, q, args...).Scan(&claimed, &c.id.ID, &run, &waitTimeout, &stock, &known)
	c.answered(err)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, ErrUnknownSKU
	case err != nil:
		return 0, false, fmt.Errorf("claim and read %s: %w", sku, err)
	case claimed != 1:
		return 0, false, ErrStaleToken
	}
	if c.id.Run, err = runMark(ctx, c.conn, run); err != nil {
		c.answered(err)
		return 0, false, fmt.Errorf("claim and read %s: %w", sku, err)
	}
	c.store.noteSession(waitTimeout)
	return stock, known, nil
}

// writeAndRecord is the second round trip: write the stock, insert the order. It answers the
// order's id (the last statement's).
func (c *saleConn) writeAndRecord(ctx context.Context, sku string, stock int64, o *Order) (int64, error) {
	c.unsure = true
	r, err := c.conn.ExecContext(ctx, writeStockStatement+"; "+insertOrder, append(writeStockArgs(sku, stock, o.Qty), insertOrderArgs(o)...)...)
	c.answered(err)
	if err != nil {
		return 0, err
	}
	return r.LastInsertId()
}

// commit is the third round trip, and ends the transaction and the connection's use: every
// error is ErrOutcomeUnknown but the server's rollback, ErrRolledBack (commitFailed). A client
// that hangs up does not cut a COMMIT short (see the other commit); the connection's read timeout
// bounds the wait, and awaitCommit the caller's.
func (c *saleConn) commit(ctx context.Context) error {
	defer c.finish()
	c.unsure = true
	_, err := c.conn.ExecContext(context.WithoutCancel(ctx), "COMMIT")
	if err != nil {
		err = commitFailed(err)
		if errors.Is(err, ErrRolledBack) { // answered: the transaction is over, the connection in step
			c.open, c.unsure = false, false
		}
		return err
	}
	c.open, c.unsure = false, false
	return nil
}

// answered records how a round trip ended: the connection is in step again after an answer,
// the server's error included (the transaction is still open then), and unsure after anything
// else (a broken or cancelled read, ErrNoRows aside, which is an answer). Every round trip sets
// unsure before it starts, so that a panic inside one leaves the connection to be discarded.
func (c *saleConn) answered(err error) {
	var server *mysql.MySQLError
	c.unsure = err != nil && !errors.Is(err, sql.ErrNoRows) && !errors.As(err, &server)
}

// end ends the transaction, if one may be open, and gives the connection back: rolled back and
// pooled when the connection is in step, else discarded, which the server sees as the client
// gone and rolls back. It does nothing once the COMMIT owns the connection.
func (c *saleConn) end() {
	if !c.handedOff {
		c.finish()
	}
}

func (c *saleConn) finish() {
	if c.ended {
		return
	}
	c.ended = true
	if c.open && !c.unsure {
		ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
		_, err := c.conn.ExecContext(ctx, "ROLLBACK")
		cancel()
		c.unsure = err != nil
	}
	if c.unsure {
		_ = c.conn.Raw(func(any) error { return driver.ErrBadConn }) // database/sql discards it
	}
	_ = c.conn.Close()
}

// rollbackTimeout bounds a ROLLBACK on a connection that just answered.
const rollbackTimeout = 5 * time.Second

// translate turns the driver's error into GORM's (a duplicate key is gorm.ErrDuplicatedKey), as
// for every statement sent through GORM.
func (s *Store) translate(err error) error {
	if t, ok := s.db.Dialector.(gorm.ErrorTranslator); ok {
		return t.Translate(err)
	}
	return err
}
