package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ErrOutcomeUnknown: the transaction's COMMIT was sent and no answer came back (the connection
// broke, or the context ended while the database worked on it). The changes may or may not have
// been applied; ResolveRequest learns which.
var ErrOutcomeUnknown = errors.New("inventory: commit outcome unknown")

// ErrRolledBack: the server answered the COMMIT with a rollback (error 1213: on Galera, the
// transaction failed certification against a write made on another node, or a write replicated
// from another node aborted it). The outcome is known: nothing was changed, and the change may be
// tried again.
var ErrRolledBack = errors.New("inventory: the database rolled the transaction back at COMMIT; nothing was changed")

// commitFailed classifies the error of a COMMIT: ErrRolledBack when the server answered with a
// rollback, which is final on every node (certification is decided alike by all of them);
// ErrOutcomeUnknown for everything else, since any other error (a broken connection, a timeout,
// a node that left the primary component while its write set was on the way) may come after the
// transaction was applied.
func commitFailed(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1213 {
		return fmt.Errorf("%w: %w", ErrRolledBack, err)
	}
	return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
}

// inTx runs fn in one transaction. An error from fn (or a panic) rolls the transaction back, so
// nothing was changed; an error from the COMMIT itself is ErrOutcomeUnknown, unless the server
// answered it with a rollback (ErrRolledBack, commitFailed). This is the one place that tells
// them apart, for every deduction but the pipelined sale's (saleConn.commit, which classifies its
// COMMIT's error with the same commitFailed). The statements before the COMMIT run under
// stmts (ctx, or ctx with an earlier deadline: Hooks.Deadline), and no COMMIT is sent once its
// deadline has passed; the COMMIT runs under ctx.
func (s *Store) inTx(ctx, stmts context.Context, fn func(tx *gorm.DB) error) error {
	tx := s.db.WithContext(stmts).Begin()
	if tx.Error != nil {
		return fmt.Errorf("begin: %w", tx.Error)
	}
	finished := false
	defer func() {
		if !finished {
			_ = tx.Rollback() // fn panicked: roll back, and let the panic go on up
		}
	}()
	conn, err := s.readSession(tx)
	if err == nil {
		err = fn(tx)
	}
	finished = true
	if err == nil {
		err = timeToCommit(stmts)
	}
	if err != nil {
		if rb := tx.Rollback().Error; rb != nil && !errors.Is(rb, gorm.ErrInvalidTransaction) {
			// No COMMIT was sent, so the server rolls back when it notices; the error says why.
			return errors.Join(err, fmt.Errorf("rollback: %w", rb))
		}
		return err
	}
	if err := commit(ctx, tx); err != nil {
		if errors.Is(err, ErrOutcomeUnknown) {
			return unanswered(err, conn)
		}
		return err
	}
	return nil
}

// commit sends the COMMIT and waits for its answer, but not past ctx's deadline. The driver sends
// a COMMIT without watching any context (database/sql's Tx.Commit takes none; only the statements
// before it are cancelled with theirs), so on a connection whose peer vanished without a reset it
// would wait for the connection's readTimeout (Open's default 10 s), or, without one, until TCP
// gives up. When the deadline passes first, commit stops waiting and answers ErrOutcomeUnknown;
// a goroutine keeps the transaction until the driver's read ends (answered, or at readTimeout),
// and the connection goes back to the pool, or is discarded, then. A context cancelled without a
// deadline passing (a client that hung up) does not cut a COMMIT short: its answer is near, and
// an unknown outcome costs the caller far more.
func commit(ctx context.Context, tx *gorm.DB) error {
	_, err := awaitCommit(ctx, func() (struct{}, error) {
		if err := tx.Commit().Error; err != nil {
			return struct{}{}, commitFailed(err)
		}
		return struct{}{}, nil
	})
	return err
}

// timeToCommit refuses to send a COMMIT once ctx's deadline has passed: awaitCommit would answer
// ErrOutcomeUnknown at once while the COMMIT went out and most likely applied, and the caller's
// budget to learn the outcome would be spent already. Rolled back instead, the change is known
// not to have happened.
func timeToCommit(ctx context.Context) error {
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		return fmt.Errorf("no COMMIT sent: the deadline passed first: %w", context.DeadlineExceeded)
	}
	return nil
}

// awaitCommit runs send, the round trip that carries a COMMIT, and waits for its answer as commit
// says: to the end without a deadline, or until ctx's deadline, after which it answers
// ErrOutcomeUnknown and send goes on alone; send must then end its transaction and give its
// connection back by itself. send says which of its errors leave the outcome unknown.
func awaitCommit[T any](ctx context.Context, send func() (T, error)) (T, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return send()
	}
	type answer struct {
		v   T
		err error
	}
	answers := make(chan answer, 1)
	go func() {
		v, err := send()
		answers <- answer{v, err}
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case a := <-answers:
		return a.v, a.err
	case <-timer.C:
		var zero T
		return zero, fmt.Errorf("%w: no answer to COMMIT by the context's deadline: %w", ErrOutcomeUnknown, context.DeadlineExceeded)
	}
}

// ResolveRequest learns what became of a purchase whose commit outcome was unknown, by its
// idempotency key. The read locks the key's index entry, so it waits until a transaction that
// still holds that key (a COMMIT the server has not finished, or a connection it has not yet seen
// die) has ended: found or not, the answer is final. When the database does not answer, or that
// transaction outlives ctx, it returns an error and the outcome stays unknown.
func (s *Store) ResolveRequest(ctx context.Context, requestID string) (Order, bool, error) {
	var o Order
	found := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("request_id = ?", requestID).Take(&o).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			return nil
		case err != nil:
			return err
		}
		found = true
		return nil
	})
	if err != nil {
		return Order{}, false, fmt.Errorf("inventory: resolve request %q: %w", requestID, err)
	}
	return o, found, nil
}
