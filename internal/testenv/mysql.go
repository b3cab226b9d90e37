package testenv

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// MySQLDatabase creates an empty database for one test (or one test package) on the provisioned
// MariaDB and returns its DSN; the database is dropped when the test ends.
func MySQLDatabase(t testing.TB) string {
	t.Helper()
	base := MySQLDSN(t)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("MYSQL_DSN: %v", err)
	}
	name := "t_" + strings.ToLower(strings.ReplaceAll(UniqueName(t), "-", "_"))
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	admin := cfg.Clone()
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Fatalf("open MariaDB: %v", err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE `" + name + "`"); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if os.Getenv("ZKSTOCK_KEEP_DB") != "" && t.Failed() { // kept for reading a failure's rows
			t.Logf("database %s kept (ZKSTOCK_KEEP_DB)", name)
			return
		}
		db, err := sql.Open("mysql", admin.FormatDSN())
		if err != nil {
			return
		}
		defer db.Close()
		if _, err := db.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// Exec runs statements on the test database, failing the test on error.
func Exec(t testing.TB, dsn string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, fmt.Errorf("exec: %w", err))
		}
	}
}
