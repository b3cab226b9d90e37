package inventory_test

import (
	"testing"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// One server's Store is its own Source: every operation and every settling goes to it, but a
// connection made at another address is not its to settle.
func TestStoreIsItsOwnSource(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	s := openStoreAt(t, dsn)
	var src inventory.Source = s
	if src.Store() != s {
		t.Fatal("Store() is not the store itself")
	}
	for _, addr := range []string{"", serverAddr(t, dsn)} {
		if at, ok := src.StoreAt(addr); !ok || at != s {
			t.Errorf("StoreAt(%q) = %p, %v; want the store", addr, at, ok)
		}
	}
	if at, ok := src.StoreAt("192.0.2.1:3306"); ok {
		t.Errorf("StoreAt another address = %p; want none", at)
	}
	src.Report(inventory.ErrOutcomeUnknown) // nowhere else to go: nothing happens
}
