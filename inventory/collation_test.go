package inventory_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// Tables an older version created under the server's case-insensitive collation are converted,
// their rows kept; after that a SKU or key that differs only in case is another one.
func TestMigrateMakesIdentifiersCaseSensitive(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, stmt := range []string{
		"CREATE TABLE products (sku varchar(64) COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, stock bigint NOT NULL, initial_stock bigint NOT NULL, fence_token bigint NOT NULL DEFAULT 0, updated_at datetime(3) NULL)",
		"INSERT INTO products VALUES ('OLD-1', 5, 5, 0, NULL)",
		"CREATE TABLE orders (id bigint AUTO_INCREMENT PRIMARY KEY, sku varchar(64) COLLATE utf8mb4_general_ci NOT NULL, qty bigint NOT NULL, request_id varchar(200) COLLATE utf8mb4_general_ci NULL, replica varchar(64) NOT NULL, fence_token bigint NOT NULL, created_at datetime(3) NULL, UNIQUE INDEX idx_orders_request_id (request_id), INDEX idx_orders_sku (sku))",
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	ctx := context.Background()
	s, err := inventory.Open(ctx, dsn, inventory.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 { // a second start finds nothing to convert
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, col := range [][2]string{{"products", "sku"}, {"orders", "sku"}, {"orders", "request_id"}, {"table_locks", "name"}} {
		var collation string
		if err := raw.QueryRow("SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?",
			col[0], col[1]).Scan(&collation); err != nil || collation != "utf8mb4_bin" {
			t.Fatalf("%s.%s: collation %q, %v", col[0], col[1], collation, err)
		}
	}
	if p, err := s.Product(ctx, "OLD-1"); err != nil || p.Stock != 5 {
		t.Fatalf("the old product: %+v, %v", p, err)
	}
	if _, err := s.Product(ctx, "old-1"); !errors.Is(err, inventory.ErrUnknownSKU) {
		t.Fatalf("old-1 found as OLD-1: %v", err)
	}
	if _, err := s.Deduct(ctx, inventory.Purchase{SKU: "OLD-1", Qty: 1, RequestID: "K-1"}, inventory.Unsafe, inventory.Hooks{}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Deduct(ctx, inventory.Purchase{SKU: "OLD-1", Qty: 2, RequestID: "k-1"}, inventory.Unsafe, inventory.Hooks{})
	if err != nil || res.Replayed {
		t.Fatalf("key k-1 after K-1: %+v, %v; want a new order", res, err)
	}
}
