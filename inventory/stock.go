package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// The stock primitives every change is made of, and the one order every change keeps them in:
// claim the fences (Fenced), look the key up, read, check, work, write, record, commit. Deduct,
// DeductCart, Cancel and DeductBatch are compositions of these, and sellPipelined (pipelined.go)
// sends their statements' texts in fewer round trips; no other file reads or writes a product's
// stock.

var errNoRows = sql.ErrNoRows

// claimFence raises the SKU's fence for f's issuer to f.Token, or fails with ErrStaleToken when a
// newer token of that issuer has written. It must be the transaction's first statement on the
// product: its row lock serializes this transaction against every other writer of the product,
// and under REPEATABLE READ the first plain read fixes the snapshot, so a read before the claim
// could predate a writer the claim waited for. The one statement also moves the fence's epoch
// when the issuer changes (see Issuer for why that keeps one token space).
func claimFence(tx *gorm.DB, sku string, f Fence) error {
	claim, args, err := claimStatement(sku, f)
	if err != nil {
		return err
	}
	r := tx.Exec(claim, args...)
	if r.Error != nil {
		return fmt.Errorf("claim fence: %w", r.Error)
	}
	if r.RowsAffected == 1 {
		return nil
	}
	var n int64
	if err := tx.Model(&Product{}).Where("sku = ?", sku).Count(&n).Error; err != nil {
		return fmt.Errorf("claim fence: %w", err)
	}
	if n == 0 {
		return ErrUnknownSKU
	}
	return ErrStaleToken
}

// claimStatement is the claim of sku's fence for f as one statement: it matches the product's row
// (Open's clientFoundRows counts a match) only when no newer token of f's issuer has written.
func claimStatement(sku string, f Fence) (string, []any, error) {
	col, err := f.Issuer.column()
	if err != nil {
		return "", nil, err
	}
	// The epoch is assigned first, so it compares the issuer before this statement overwrites it,
	// whether the server assigns left to right (MySQL, MariaDB's default) or all at once
	// (MariaDB's SIMULTANEOUS_ASSIGNMENT).
	return "UPDATE products SET fence_epoch = fence_epoch + (fence_issuer <> ?), fence_issuer = ?, " + col + " = ? WHERE sku = ? AND " + col + " <= ?",
		[]any{f.Issuer.String(), f.Issuer.String(), f.Token, sku, f.Token}, nil
}

// claimFences claims every SKU's fence, in sorted order (as every change touches rows), when the
// mode is Fenced; other modes claim nothing.
func claimFences(tx *gorm.DB, mode Mode, fences map[string]Fence) error {
	if mode != Fenced {
		return nil
	}
	for _, sku := range slices.Sorted(maps.Keys(fences)) {
		if err := claimFence(tx, sku, fences[sku]); err != nil {
			return err
		}
	}
	return nil
}

// readStock reads a SKU's stock through the transaction; forUpdate locks the row.
func readStock(tx *gorm.DB, sku string, forUpdate bool) (int64, error) {
	q := "SELECT stock FROM products WHERE sku = ?"
	if forUpdate {
		q += " FOR UPDATE"
	}
	var stock int64
	if err := tx.Raw(q, sku).Row().Scan(&stock); err != nil {
		if errors.Is(err, errNoRows) {
			return 0, ErrUnknownSKU
		}
		return 0, fmt.Errorf("read stock: %w", err)
	}
	return stock, nil
}

// stockAndKeyColumns reads a SKU's stock and whether an order holds an idempotency key, after a
// SELECT that may add columns of its own; the arguments are the key, then the SKU. It is a plain
// read only: a locking read would also lock the gap of the orders' key index where the key would
// go, and two transactions that each hold such a gap deadlock when both insert into it.
const stockAndKeyColumns = "p.stock, o.id IS NOT NULL FROM products p LEFT JOIN orders o ON o.request_id = ? WHERE p.sku = ?"

// readsPlainly says whether mode reads the stock with a plain read before it writes it.
func readsPlainly(mode Mode) bool { return mode == Fenced || mode == Unfenced || mode == Unsafe }

// writeStock writes a stock value computed from a read, the change having taken take units (or,
// negative, returned them): the read-modify-write of every mode but CAS.
func writeStock(tx *gorm.DB, sku string, stock, take int64) error {
	if err := tx.Exec(writeStockStatement, writeStockArgs(sku, stock, take)...).Error; err != nil {
		return fmt.Errorf("write stock of %s: %w", sku, err)
	}
	return nil
}

// writeStockStatement writes the stock, and counts what the write overwrote: the stock it
// replaces less take is what the write should leave; a higher value is units of changes lost
// upward (lost_high: deductions overwritten), a lower one units lost downward (lost_low:
// restocks overwritten), so that the two never cancel out in the audit. The stock is assigned
// last, so that the counts read the stock replaced whether the server assigns left to right or
// all at once.
const writeStockStatement = "UPDATE products SET lost_high = lost_high + GREATEST(0, ? - (stock - ?)), " +
	"lost_low = lost_low + GREATEST(0, (stock - ?) - ?), stock = ?, updated_at = ? WHERE sku = ?"

func writeStockArgs(sku string, stock, take int64) []any {
	return []any{stock, take, take, stock, stock, time.Now().UTC(), sku}
}

// shiftStock is CAS's one conditional statement: take (or, negative, return) units only if the
// stock covers them, applied atomically by the database. It reports whether it did.
func shiftStock(tx *gorm.DB, sku string, take int64) (bool, error) {
	r := tx.Exec("UPDATE products SET stock = stock - ?, updated_at = ? WHERE sku = ? AND stock >= ?", take, time.Now().UTC(), sku, take)
	if r.Error != nil {
		return false, fmt.Errorf("claim stock of %s: %w", sku, r.Error)
	}
	return r.RowsAffected == 1, nil
}

// line is one SKU's part of a change: the units it takes, or (negative) returns.
type line struct {
	sku  string
	take int64
}

// moveStock applies lines (distinct SKUs, in the caller's order) as mode says, running work once
// in the critical place, and returns the stock left per SKU. It is the one place that says how
// each mode reads, checks and writes:
//   - Fenced, Unfenced, Unsafe: a plain read, the check, the work, the new value written back. A
//     read-modify-write, protected by the fence claimed before, by the lock alone, or by nothing
//     (Unsafe: the overselling the demonstration shows).
//   - ForUpdate: the same, with reads that lock the rows.
//   - CAS: the work first (a payment is taken before stock is claimed), then one conditional
//     statement per SKU; a short one rolls back what the others claimed.
//
// A sale of one line in the plain modes does what this says for them in three round trips
// (sellPipelined), with the statements' texts taken from here.
//
// Rows are touched in sorted order, the same in every change, so two changes cannot deadlock on
// row locks. A short line is a *ShortError naming the first short line in the caller's order.
func moveStock(ctx context.Context, tx *gorm.DB, mode Mode, lines []line, work func(context.Context) error) (map[string]int64, error) {
	sorted := slices.Clone(lines)
	slices.SortFunc(sorted, func(a, b line) int { return strings.Compare(a.sku, b.sku) })
	left := make(map[string]int64, len(lines))
	if mode == CAS {
		if err := runWork(ctx, work); err != nil {
			return nil, err
		}
		claimed := map[string]int64{}
		for _, l := range sorted {
			ok, err := shiftStock(tx, l.sku, l.take)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, firstShort(tx, lines, sorted, claimed)
			}
			claimed[l.sku] = l.take
		}
		for _, l := range sorted {
			stock, err := readStock(tx, l.sku, false)
			if err != nil {
				return nil, err
			}
			left[l.sku] = stock
		}
		return left, nil
	}
	for _, l := range sorted {
		stock, err := readStock(tx, l.sku, mode == ForUpdate)
		if err != nil {
			return nil, err
		}
		left[l.sku] = stock
	}
	for _, l := range lines {
		if left[l.sku] < l.take {
			return nil, &ShortError{SKU: l.sku}
		}
	}
	if err := runWork(ctx, work); err != nil {
		return nil, err
	}
	for _, l := range sorted {
		left[l.sku] -= l.take
		if err := writeStock(tx, l.sku, left[l.sku], l.take); err != nil {
			return nil, err
		}
	}
	return left, nil
}

// firstShort names the first line, in the caller's order, that the stock cannot cover, after a
// conditional claim failed. Its reads lock (a plain read would see the transaction's snapshot,
// which may be older than the claim that failed), in sorted order, as every change locks rows;
// they see this transaction's own claims, which are added back: the question is what the stock
// was before this change (Porcupine found carts short of B named as short of A).
func firstShort(tx *gorm.DB, lines, sorted []line, claimed map[string]int64) error {
	stock := map[string]int64{}
	for _, l := range sorted {
		left, err := readStock(tx, l.sku, true)
		if err != nil {
			return err
		}
		stock[l.sku] = left + claimed[l.sku]
	}
	for _, l := range lines {
		if stock[l.sku] < l.take {
			return &ShortError{SKU: l.sku}
		}
	}
	return errors.New("a conditional claim failed, yet every line is covered") // rolls back; a retry decides
}

func runWork(ctx context.Context, work func(context.Context) error) error {
	if work == nil {
		return nil
	}
	return work(ctx)
}

func beforeCommit(check func() error) error {
	if check == nil {
		return nil
	}
	return check()
}
