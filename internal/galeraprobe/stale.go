// Package galeraprobe measures what a Galera cluster shows a client that writes through one node
// and reads right after through another: the stale reads wsrep_sync_wait=0 (Galera's default)
// allows and 1 does not. cmd/stalereads runs it for tutorial 12.
package galeraprobe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Result is one run of StaleReads.
type Result struct {
	Reads  int   // reads made, one after each write
	Stale  int   // reads that did not see the write acknowledged just before them
	Behind int64 // the most writes a stale read was behind
}

// Reader is where the reads go: a pool (*sql.DB) on another node, or anything else that queries.
type Reader interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ErrNoProduct is returned when the product to write does not exist.
var ErrNoProduct = errors.New("galeraprobe: no such product")

// StaleReads sets the stock of product sku through writer to 1, 2, ... n, each an autocommit
// UPDATE, and after each one is acknowledged reads the stock through reader: a read that returns
// less than the value just written is stale. The product's stock is left at n. writer is a pool on
// one node, reader one on another whose sessions carry the wsrep_sync_wait under test (a DSN
// parameter).
func StaleReads(ctx context.Context, writer *sql.DB, reader Reader, sku string, n int) (Result, error) {
	var r Result
	for i := int64(1); i <= int64(n); i++ {
		res, err := writer.ExecContext(ctx, "UPDATE products SET stock = ? WHERE sku = ?", i, sku)
		if err != nil {
			return r, fmt.Errorf("write %d: %w", i, err)
		}
		if rows, err := res.RowsAffected(); err != nil {
			return r, fmt.Errorf("write %d: %w", i, err)
		} else if rows == 0 && i == 1 {
			// the first write changes a stock that is not 1 already, or finds no row
			var found int
			if err := writer.QueryRowContext(ctx, "SELECT COUNT(*) FROM products WHERE sku = ?", sku).Scan(&found); err != nil {
				return r, fmt.Errorf("look up %s: %w", sku, err)
			}
			if found == 0 {
				return r, fmt.Errorf("%w: %s", ErrNoProduct, sku)
			}
		}
		var got int64
		if err := reader.QueryRowContext(ctx, "SELECT stock FROM products WHERE sku = ?", sku).Scan(&got); err != nil {
			return r, fmt.Errorf("read %d: %w", i, err)
		}
		r.Reads++
		if got < i {
			r.Stale++
			r.Behind = max(r.Behind, i-got)
		}
	}
	return r, nil
}
