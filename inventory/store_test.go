package inventory_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// withParam is dsn with one more system variable, which the driver sets on every connection it
// opens, as a server's global setting would be.
func withParam(t *testing.T, dsn, name, value string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[name] = value
	return cfg.FormatDSN()
}

// Open refuses sessions whose auto_increment_increment is not 1: a multi-row insert would then
// hand the orders of a batch ids that are not theirs. The check reads the session the inserts
// use: the same DSN makes a multi-row insert skip ids, as shown on a plain connection.
func TestOpenRefusesAutoIncrementOtherThanOne(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQLDatabase(t)
	s, err := inventory.Open(ctx, dsn, inventory.PoolOptions{})
	if err != nil {
		t.Fatalf("open with auto_increment_increment 1: %v", err)
	}
	_ = s.Close()

	stepped := withParam(t, dsn, "auto_increment_increment", "2")
	db, err := sql.Open("mysql", stepped)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE TABLE steps (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)", "INSERT INTO steps (v) VALUES (1), (2), (3)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var lo, hi int64
	if err := db.QueryRowContext(ctx, "SELECT MIN(id), MAX(id) FROM steps").Scan(&lo, &hi); err != nil {
		t.Fatal(err)
	}
	if hi-lo != 4 {
		t.Fatalf("ids %d..%d for three rows: the session's increment did not apply, so this test shows nothing", lo, hi)
	}

	s, err = inventory.Open(ctx, stepped, inventory.PoolOptions{})
	if err == nil {
		_ = s.Close()
		t.Fatal("Open accepted auto_increment_increment 2")
	}
	if !errors.Is(err, inventory.ErrAutoIncrement) || !strings.Contains(err.Error(), "auto_increment_increment") || !strings.Contains(err.Error(), "has 2") {
		t.Fatalf("Open: %v, want ErrAutoIncrement naming the setting and its value", err)
	}
	t.Logf("Open refused: %v", err)
}

// Open refuses a character set in which the driver's escaping of arguments is unsafe: the pool
// runs texts of several statements, and in gbk an argument's escaped quote can end up inside a
// multibyte character, ending the string early.
func TestOpenRefusesAnUnsafeCharset(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQLDatabase(t)
	if s, err := inventory.Open(ctx, withParam(t, dsn, "charset", "gbk"), inventory.PoolOptions{}); !errors.Is(err, inventory.ErrUnsafeCharset) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("open with charset gbk: %v, want ErrUnsafeCharset", err)
	}
	s, err := inventory.Open(ctx, withParam(t, dsn, "charset", "latin1"), inventory.PoolOptions{})
	if err != nil {
		t.Fatalf("open with charset latin1: %v", err)
	}
	_ = s.Close()
}
