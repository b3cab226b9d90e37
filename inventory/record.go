package inventory

import (
	"fmt"
	"strconv"
	"strings"

	"gorm.io/gorm"
)

// insertOrder is the one statement that records a single order: fixed, so that the hot path of a
// purchase builds no statement by reflection (GORM's Create does, per call).
const insertOrder = "INSERT INTO orders (sku, qty, request_id, body_digest, replica, fence_token, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"

// orderValues is one row of insertOrder's VALUES.
const orderValues = "(?, ?, ?, ?, ?, ?, ?)"

func insertOrderArgs(o *Order) []any {
	return []any{o.SKU, o.Qty, o.RequestID, o.BodyDigest, o.Replica, o.FenceToken, o.CreatedAt}
}

// recordOrders inserts the orders, in their order, and sets their ids and creation times. Every
// id is the server's answer for its own row, never derived from another's: a multi-row insert's
// ids are not consecutive under Galera's wsrep_auto_increment_control (increment 3, one offset per
// node), nor with any auto_increment_increment other than 1. One order: insertOrder and its
// LastInsertId. Several (a cart, a batch), on a server with INSERT ... RETURNING (MariaDB 10.5 and
// later): one statement that returns each row's id, in the rows' order; elsewhere (MySQL),
// insertOrder once per order, in the same transaction. Errors are translated as GORM's are (a
// duplicate key is gorm.ErrDuplicatedKey, which sell and DeductBatch rely on).
func (s *Store) recordOrders(tx *gorm.DB, orders []Order) error {
	now := tx.NowFunc()
	for i := range orders {
		orders[i].CreatedAt = now
	}
	var err error
	if len(orders) > 1 && s.insertReturns {
		err = insertReturning(tx, orders)
	} else {
		err = insertEach(tx, orders)
	}
	if err != nil {
		return s.translate(err)
	}
	return nil
}

// insertEach inserts the orders one statement each.
func insertEach(tx *gorm.DB, orders []Order) error {
	for i := range orders {
		r, err := tx.Statement.ConnPool.ExecContext(tx.Statement.Context, insertOrder, insertOrderArgs(&orders[i])...)
		if err != nil {
			return err
		}
		if orders[i].ID, err = r.LastInsertId(); err != nil {
			return err
		}
	}
	return nil
}

// insertReturning inserts the orders in one statement that returns their ids, one row per order
// in the VALUES' order (MariaDB returns the rows as it inserts them).
func insertReturning(tx *gorm.DB, orders []Order) error {
	var q strings.Builder
	q.WriteString(insertOrder)
	args := insertOrderArgs(&orders[0])
	for i := 1; i < len(orders); i++ {
		q.WriteString(", " + orderValues)
		args = append(args, insertOrderArgs(&orders[i])...)
	}
	q.WriteString(" RETURNING id")
	rows, err := tx.Statement.ConnPool.QueryContext(tx.Statement.Context, q.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		if n == len(orders) {
			return fmt.Errorf("insert %d orders: more ids returned than rows", len(orders))
		}
		if err := rows.Scan(&orders[n].ID); err != nil {
			return err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if n != len(orders) {
		return fmt.Errorf("insert %d orders: %d ids returned", len(orders), n)
	}
	return nil
}

// insertReturnsOn says whether the server whose VERSION() is version has INSERT ... RETURNING:
// MariaDB from 10.5 on.
func insertReturnsOn(version string) bool {
	if !strings.Contains(version, "MariaDB") {
		return false
	}
	major, rest, _ := strings.Cut(version, ".")
	minor, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > 10 || ma == 10 && mi >= 5
}
