package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// KeyAttempt is one attempt's holding of a change's key: written before the attempt is admitted
// and deleted once it is answered, so that the whole fleet knows the key is in flight. A holding
// its replica never deleted (a crash) expires by the database's clock, once no COMMIT of the
// attempt can still apply; HoldKey then takes it over.
type KeyAttempt struct {
	RequestID string    `gorm:"primaryKey;size:160"`
	Attempt   string    `gorm:"size:32;not null"`
	Replica   string    `gorm:"size:64;not null"`
	ExpiresAt time.Time `gorm:"type:datetime(6);not null;index"`
}

// TableName is the table of keys in flight.
func (KeyAttempt) TableName() string { return "key_attempts" }

// CancelKey is the key a cancellation of order id is held under: the order's, for whoever cancels
// it. No client key can take it (KeySeparator).
func CancelKey(id int64) string { return fmt.Sprintf("%scancel/%d", KeySeparator, id) }

// HoldKey records that attempt, of this replica, holds key for hold from now by the database's
// clock, and says whether an order is recorded under any of orderKeys (made: the change may have
// been made; its look-up says), in the same round trip. held is false, with no error, while
// another attempt holds it unexpired; an expired holding is taken over, and attempt's own (an
// INSERT sent again after its reply was lost) kept. A conflict between two Galera nodes' writes
// (1213) is not held either: the caller asks again.
func (s *Store) HoldKey(ctx context.Context, key, attempt, replica string, hold time.Duration, orderKeys ...string) (held, made bool, _ error) {
	us := hold.Microseconds()
	in := "?" + strings.Repeat(", ?", max(len(orderKeys)-1, 0))
	args := []any{key, attempt, replica, us}
	for _, k := range orderKeys {
		args = append(args, k)
	}
	if len(orderKeys) == 0 {
		in, args = "NULL", args[:4]
	}
	q := "INSERT IGNORE INTO key_attempts (request_id, attempt, replica, expires_at) VALUES (?, ?, ?, NOW(6) + INTERVAL ? MICROSECOND); " +
		"SELECT ROW_COUNT(), EXISTS (SELECT 1 FROM orders WHERE request_id IN (" + in + "))"
	inserted, made, err := s.holdAndLook(ctx, q, args)
	if err == nil && inserted != 1 {
		var res sql.Result
		res, err = s.sqlDB.ExecContext(ctx, "UPDATE key_attempts SET attempt = ?, replica = ?, expires_at = NOW(6) + INTERVAL ? MICROSECOND WHERE request_id = ? AND (expires_at <= NOW(6) OR attempt = ?)",
			attempt, replica, us, key, attempt)
		if err == nil {
			var n int64
			n, err = res.RowsAffected()
			inserted = n
		}
	}
	switch {
	case err == nil:
		return inserted == 1, made, nil
	case isLockConflict(err):
		return false, made, nil
	}
	return false, false, fmt.Errorf("inventory: hold key %q: %w", key, err)
}

// holdAndLook runs HoldKey's two statements in one round trip and reads the second's row.
func (s *Store) holdAndLook(ctx context.Context, q string, args []any) (inserted int64, made bool, _ error) {
	rows, err := s.sqlDB.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	for !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, false, err
		}
		if !rows.NextResultSet() {
			return 0, false, fmt.Errorf("no row from %q", q)
		}
	}
	if err := rows.Scan(&inserted, &made); err != nil {
		return 0, false, err
	}
	return inserted, made, rows.Close()
}

// HeldKey is one attempt's holding of a key.
type HeldKey struct{ Key, Attempt string }

// ReleaseKeys deletes the holdings in one statement; a holding taken over since is left alone.
func (s *Store) ReleaseKeys(ctx context.Context, held []HeldKey) error {
	if len(held) == 0 {
		return nil
	}
	// request_id IN (...) lets the primary key find the rows: with the pairs alone the server
	// scans the table, locking every row under the holdings being inserted meanwhile.
	var q strings.Builder
	q.WriteString("DELETE FROM key_attempts WHERE request_id IN (?" + strings.Repeat(", ?", len(held)-1) + ") AND (request_id, attempt) IN (")
	args := make([]any, 0, 3*len(held))
	for _, h := range held {
		args = append(args, h.Key)
	}
	for i, h := range held {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?)")
		args = append(args, h.Key, h.Attempt)
	}
	q.WriteString(")")
	if _, err := s.sqlDB.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("inventory: release %d keys: %w", len(held), err)
	}
	return nil
}

// SweepKeys deletes up to limit holdings expired for longer than grace (crashed replicas' keys that
// no retry came for), and says how many it deleted.
func (s *Store) SweepKeys(ctx context.Context, grace time.Duration, limit int) (int64, error) {
	res, err := s.sqlDB.ExecContext(ctx, "DELETE FROM key_attempts WHERE expires_at < NOW(6) - INTERVAL ? MICROSECOND LIMIT ?", grace.Microseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("inventory: sweep expired keys: %w", err)
	}
	return res.RowsAffected()
}
