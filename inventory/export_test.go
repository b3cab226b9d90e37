package inventory

import (
	"context"
	"time"
)

// InsertLegacyCartForTest records a cart's orders as the service did before heads and digests:
// every item under KEY#SKU.
func (s *Store) InsertLegacyCartForTest(ctx context.Context, c Cart) error {
	orders := make([]Order, len(c.Items))
	for i, it := range c.Items {
		key := ItemKey(c.RequestID, it.SKU)
		orders[i] = Order{SKU: it.SKU, Qty: it.Qty, Replica: "legacy", RequestID: &key}
	}
	return s.db.WithContext(ctx).Create(&orders).Error
}

// FreezeClockForTest stops the store's process clock at at: two stores so frozen write the same
// times, as two attempts a moment apart may.
func (s *Store) FreezeClockForTest(at time.Time) {
	s.now = func() time.Time { return at }
}

// SkewClockForTest sets the store's process clock off by d, as another host's would be.
func (s *Store) SkewClockForTest(d time.Duration) {
	s.now = func() time.Time { return time.Now().Add(d) }
}

// ConnIDForTest is the server's id of conn.
func ConnIDForTest(conn ServerConn) int64 { return conn.ID }

// ConnAtForTest is conn as if it had been made at addr: a test's proxy and the server behind it
// are one server at two addresses.
func ConnAtForTest(conn ServerConn, addr string) ServerConn {
	conn.Addr = addr
	return conn
}

// SetInsertReturningForTest chooses how recordOrders inserts several orders: one INSERT ...
// RETURNING (on a server that has it), or one statement per order.
func (s *Store) SetInsertReturningForTest(on bool) { s.insertReturns = on }

// SessionVarForTest reads a session variable on a connection of the store's pool.
func (s *Store) SessionVarForTest(ctx context.Context, name string) (string, error) {
	var v string
	err := s.sqlDB.QueryRowContext(ctx, "SELECT @@SESSION."+name).Scan(&v)
	return v, err
}
