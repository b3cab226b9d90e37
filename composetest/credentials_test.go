package composetest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// The stack is secure by default: MySQL's root needs its password, the replicas' database user
// may not drop a table or read mysql.user, Redis answers nobody without a password and the redis
// modes' user may not flush it (the published ports, from this machine, with ./secrets).
func testCredentials(t *testing.T, s *stack) {
	ctx := context.Background()
	secret := func(name string) string {
		b, err := os.ReadFile(filepath.Join(s.root, "secrets", name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	errno := func(err error) uint16 {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			return me.Number
		}
		return 0
	}
	exec := func(dsn, stmt string) error {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, stmt)
		return err
	}
	if err := exec("root@tcp(127.0.0.1:3306)/", "SELECT 1"); errno(err) != 1045 {
		t.Errorf("MySQL's root without a password: %v, want 1045 access denied", err)
	}
	if err := exec("root:"+secret("mysql_root_password")+"@tcp(127.0.0.1:3306)/", "SELECT 1"); err != nil {
		t.Errorf("MySQL's root with ./secrets/mysql_root_password: %v", err)
	}
	svc := strings.Replace(secret("mysql_dsn"), "@tcp(mysql:3306)", "@tcp(127.0.0.1:3306)", 1)
	if err := exec(svc, "SELECT COUNT(*) FROM products"); err != nil {
		t.Errorf("the replicas' user cannot read its rows: %v", err)
	}
	for _, stmt := range []string{"DROP TABLE products", "SELECT User FROM mysql.user", "CREATE DATABASE other"} {
		if err := exec(svc, stmt); errno(err) == 0 {
			t.Errorf("%s as the replicas' user: %v, want access denied", stmt, err)
		}
	}
	anon := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer anon.Close()
	if err := anon.Get(ctx, "zkstock:lock:sku:X").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("Redis without a password: %v, want NOAUTH", err)
	}
	user := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", Username: "zkstock", Password: secret("redis_password")})
	defer user.Close()
	if err := user.FlushAll(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Errorf("FLUSHALL as the redis modes' user: %v, want NOPERM", err)
	}
	record(t, "credentials: MySQL's root refused without its password; the replicas' user reads its rows, may not DROP, CREATE DATABASE or read mysql.user; Redis answers NOAUTH without a password, NOPERM to FLUSHALL from the replicas' user")
}
