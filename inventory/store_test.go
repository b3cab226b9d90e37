package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// The orders of a batch and of a cart each answer with their own row's id whatever the server's
// auto_increment_increment (Galera's wsrep_auto_increment_control makes it 3): the session's
// increment is shown to apply (ids step by 3), and each id read back names the row of its own
// purchase. Both ways of inserting several orders are checked: INSERT ... RETURNING, and one
// statement per order (MySQL's).
func TestOrderIDsWithAnIncrementOtherThanOne(t *testing.T) {
	dsn := testenv.WithDSNParam(t, testenv.WithDSNParam(t, testenv.MySQLDatabase(t), "auto_increment_increment", "3"), "auto_increment_offset", "2")
	s := openStoreAt(t, dsn)
	for _, returning := range []bool{true, false} {
		s.SetInsertReturningForTest(returning)
		checkOrderIDs(t, s, fmt.Sprintf("returning-%v", returning), 3)
	}
}

// checkOrderIDs runs a batch of five purchases and a cart of three on s, and checks that every
// order answered is the row with its id, and that the ids step by step (the increment).
func checkOrderIDs(t *testing.T, s *inventory.Store, prefix string, step int64) {
	t.Helper()
	ctx := context.Background()
	sku := prefix + "-batch"
	mustReset(t, s, sku, 1000)
	items := make([]inventory.BatchItem, 5)
	for i := range items {
		items[i].Purchase = inventory.Purchase{SKU: sku, Qty: int64(i + 1), RequestID: fmt.Sprintf("%s-k%d", prefix, i), Replica: "r", Token: 1}
	}
	if err := s.DeductBatch(ctx, sku, inventory.Fence{Token: 1}, items, nil); err != nil {
		t.Fatal(err)
	}
	var answered []inventory.Order
	for i, it := range items {
		if it.Err != nil {
			t.Fatalf("item %d: %v", i, it.Err)
		}
		answered = append(answered, it.Result.Order)
	}
	a, b := prefix+"-cart-a", prefix+"-cart-b"
	mustReset(t, s, a, 10)
	mustReset(t, s, b, 10)
	c := prefix + "-cart-c"
	mustReset(t, s, c, 10)
	cart, err := s.DeductCart(ctx, inventory.Cart{Items: []inventory.CartItem{{SKU: a, Qty: 1}, {SKU: b, Qty: 2}, {SKU: c, Qty: 3}},
		RequestID: prefix + "-cart", Replica: "r", Tokens: map[string]int64{a: 1, b: 1, c: 1}}, inventory.Fenced, inventory.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	for _, group := range [][]inventory.Order{answered, cart.Orders} {
		for i, o := range group {
			row, found, err := s.OrderByID(ctx, o.ID)
			if err != nil || !found {
				t.Fatalf("%s: order %d answered, read back: found %v, %v", prefix, o.ID, found, err)
			}
			if row.SKU != o.SKU || row.Qty != o.Qty || *row.RequestID != *o.RequestID {
				t.Fatalf("%s: id %d answered for %s x%d (%s), but its row is %s x%d (%s)", prefix, o.ID, o.SKU, o.Qty, *o.RequestID, row.SKU, row.Qty, *row.RequestID)
			}
			if i > 0 && o.ID-group[i-1].ID != step {
				t.Fatalf("%s: ids %d then %d: the increment %d did not apply, so this shows nothing", prefix, group[i-1].ID, o.ID, step)
			}
		}
	}
	t.Logf("%s: batch ids %v, cart ids %v", prefix, ids(answered), ids(cart.Orders))
}

func ids(os []inventory.Order) []int64 {
	var out []int64
	for _, o := range os {
		out = append(out, o.ID)
	}
	return out
}

// On a server without Galera, Open checks what it always did, and no more: servers.sh's MariaDB
// runs innodb_flush_log_at_trx_commit=2, which only a Galera node must not.
func TestOpenOnAServerWithoutGalera(t *testing.T) {
	ctx := context.Background()
	s, err := inventory.Open(ctx, testenv.MySQLDatabase(t), inventory.PoolOptions{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	if s.Galera() {
		t.Fatal("the single MariaDB taken for a Galera node")
	}
}

// Open refuses a character set in which the driver's escaping of arguments is unsafe: the pool
// runs texts of several statements, and in gbk an argument's escaped quote can end up inside a
// multibyte character, ending the string early.
func TestOpenRefusesAnUnsafeCharset(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQLDatabase(t)
	if s, err := inventory.Open(ctx, testenv.WithDSNParam(t, dsn, "charset", "gbk"), inventory.PoolOptions{}); !errors.Is(err, inventory.ErrUnsafeCharset) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("open with charset gbk: %v, want ErrUnsafeCharset", err)
	}
	s, err := inventory.Open(ctx, testenv.WithDSNParam(t, dsn, "charset", "latin1"), inventory.PoolOptions{})
	if err != nil {
		t.Fatalf("open with charset latin1: %v", err)
	}
	_ = s.Close()
}
