package inventory_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// The fenced deduction claims the fence before it reads anything. Under REPEATABLE READ the
// first plain read of a transaction fixes its snapshot; if that read came before the claim (an
// idempotency look-up, say), a holder whose claim waited for another writer with the same token
// would go on to read the stock as it was before that writer committed, and overwrite it.
func TestFencedDeductionReadsAfterItsClaim(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	ctx := context.Background()
	s := openStoreAt(t, dsn)
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })

	const sku, token = "SKU-SNAP", 100
	mustReset(t, s, sku, 10)
	if _, err := s.Deduct(ctx, inventory.Purchase{SKU: sku, Qty: 1, Token: token, RequestID: "first"}, inventory.Fenced, inventory.Hooks{}); err != nil {
		t.Fatal(err)
	}
	// Another writer under the same token holds the product's row.
	other, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if _, err := other.Exec("SELECT stock FROM products WHERE sku = ? FOR UPDATE", sku); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Deduct(ctx, inventory.Purchase{SKU: sku, Qty: 1, Token: token, RequestID: "second"}, inventory.Fenced, inventory.Hooks{})
		done <- err
	}()
	// Wait until the deduction is blocked on the row (at its fence claim), then let the other
	// writer sell one unit and commit.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := raw.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'UPDATE products SET fence_epoch%'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 1 {
			break // the claim cannot finish while the other writer holds the row
		}
		if time.Now().After(deadline) {
			t.Fatal("the deduction never reached its fence claim")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := other.Exec("UPDATE products SET stock = stock - 1 WHERE sku = ?", sku); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec("INSERT INTO orders (sku, qty, request_id, replica, fence_token, created_at) VALUES (?, 1, 'other', 'test', ?, NOW())", sku, token); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a := audit(t, s, sku); a.Stock != 7 || a.LostUpdates != 0 {
		t.Fatalf("audit %+v: the deduction read the stock from before the other writer's commit", a)
	}
}
