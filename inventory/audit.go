package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// Audit is what the tables say about one SKU after a run.
type Audit struct {
	SKU          string `json:"sku"`
	InitialStock int64  `json:"initial_stock"`
	Stock        int64  `json:"stock"`
	// Orders and UnitsSold count the orders that stand: a cancelled order's units are back in stock.
	Orders    int64 `json:"orders"`
	UnitsSold int64 `json:"units_sold"`
	// Oversold is units sold (and not returned) beyond the initial stock.
	Oversold int64 `json:"oversold"`
	// LostUpdates is LostDeductions + LostRestocks, so that a lost deduction and a lost restock
	// cannot cancel out; and never less than how far the stock is from what the orders say it
	// must be, InitialStock - UnitsSold.
	LostUpdates int64 `json:"lost_updates"`
	// Cancelled and UnitsRestocked count the cancelled orders and the units they returned.
	Cancelled      int64 `json:"cancelled"`
	UnitsRestocked int64 `json:"units_restocked"`
	// LostDeductions and LostRestocks are the units of deductions (the stock left too high) and
	// of restocks (too low) that a concurrent read-modify-write overwrote, each counted as the
	// write was made.
	LostDeductions int64 `json:"lost_deductions"`
	LostRestocks   int64 `json:"lost_restocks"`
}

// Audit reads a SKU's stock and orders in one consistent snapshot.
func (s *Store) Audit(ctx context.Context, sku string) (Audit, error) {
	a := Audit{SKU: sku}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var p Product
		if err := tx.Where("sku = ?", sku).Take(&p).Error; err != nil {
			return err
		}
		a.InitialStock, a.Stock, a.LostDeductions, a.LostRestocks = p.InitialStock, p.Stock, p.LostHigh, p.LostLow
		return tx.Raw(`SELECT COALESCE(SUM(cancelled_at IS NULL), 0), COALESCE(SUM(CASE WHEN cancelled_at IS NULL THEN qty END), 0),
			COALESCE(SUM(cancelled_at IS NOT NULL), 0), COALESCE(SUM(CASE WHEN cancelled_at IS NOT NULL THEN qty END), 0)
			FROM orders WHERE sku = ?`, sku).Row().Scan(&a.Orders, &a.UnitsSold, &a.Cancelled, &a.UnitsRestocked)
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Audit{}, ErrUnknownSKU
	}
	if err != nil {
		return Audit{}, fmt.Errorf("inventory: audit %s: %w", sku, err)
	}
	a.Oversold = max(0, a.UnitsSold-a.InitialStock)
	off := a.Stock - (a.InitialStock - a.UnitsSold)
	a.LostUpdates = max(a.LostDeductions+a.LostRestocks, off, -off)
	return a, nil
}
