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
//
// The DSN is MYSQL_ADMIN_DSN's user's (root in scripts/servers.sh), which may create, alter and
// drop tables: the test's own migration runs with it. ServiceDSN gives the same database as the
// service's user.
func MySQLDatabase(t testing.TB) string {
	t.Helper()
	base := MySQLAdminDSN(t)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("MYSQL_ADMIN_DSN: %v", err)
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
		revokeGrants(t, db, name) // a database's grants (AsUser's) outlive it: they go with it
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

// MySQLAdminDSN is the user that creates databases and grants on them: MYSQL_ADMIN_DSN, or
// MYSQL_DSN when it is unset (servers of one's own, whose MYSQL_DSN is such a user).
func MySQLAdminDSN(t testing.TB) string {
	if v := os.Getenv("MYSQL_ADMIN_DSN"); v != "" {
		return v
	}
	return MySQLDSN(t)
}

// ServiceDSN is dsn's database (one of MySQLDatabase's) as the service's user, MYSQL_DSN's, with
// on it exactly the grants that user has on its own schema (scripts/mysql-init/zkstock-users.sh's).
// With MYSQL_DSN's user the admin itself, it is dsn unchanged.
func ServiceDSN(t testing.TB, dsn string) string { return AsUser(t, dsn, MySQLDSN(t)) }

// AsUser is dsn (one of MySQLDatabase's databases, at dsn's address and with its parameters) as
// user's user (user is a DSN of that user on its own schema), granted on it what that user has on
// its own schema, copied from SHOW GRANTS.
func AsUser(t testing.TB, dsn, user string) string {
	t.Helper()
	svc, err := mysql.ParseDSN(user)
	if err != nil {
		t.Fatalf("%s: %v", user, err)
	}
	target, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("%s: %v", dsn, err)
	}
	if svc.User == target.User {
		return dsn
	}
	db, err := sql.Open("mysql", svc.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SHOW GRANTS")
	if err != nil {
		t.Fatalf("SHOW GRANTS as the service user: %v", err)
	}
	defer rows.Close()
	on := "ON `" + svc.DBName + "`.* TO "
	var grants []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(g, on) {
			grants = append(grants, strings.Replace(g, on, "ON `"+target.DBName+"`.* TO ", 1))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(grants) == 0 {
		t.Fatalf("the service user %s has no grant on %s", svc.User, svc.DBName)
	}
	Exec(t, dsn, grants...)
	out := target.Clone() // its address too: a test's proxy, say
	out.User, out.Passwd = svc.User, svc.Passwd
	return out.FormatDSN()
}

// revokeGrants takes back every user's grant on the database name.
func revokeGrants(t testing.TB, db *sql.DB, name string) {
	rows, err := db.Query("SELECT User, Host FROM mysql.db WHERE Db = ?", name)
	if err != nil {
		t.Logf("grants on %s: %v", name, err)
		return
	}
	var users [][2]string
	for rows.Next() {
		var u [2]string
		if err := rows.Scan(&u[0], &u[1]); err == nil {
			users = append(users, u)
		}
	}
	_ = rows.Close()
	for _, u := range users {
		var user string // REVOKE takes no placeholders: the names quoted by the server
		if err := db.QueryRow("SELECT CONCAT(QUOTE(?), '@', QUOTE(?))", u[0], u[1]).Scan(&user); err != nil {
			t.Logf("quote %s@%s: %v", u[0], u[1], err)
			continue
		}
		if _, err := db.Exec("REVOKE ALL PRIVILEGES ON `" + name + "`.* FROM " + user); err != nil {
			t.Logf("revoke on %s from %s@%s: %v", name, u[0], u[1], err)
		}
	}
}

// RequireServiceUser ends the test when MYSQL_DSN's user is the admin's: skipped on servers of
// one's own without MYSQL_ADMIN_DSN, failed when MYSQL_ADMIN_DSN names a user of its own, since
// the service would then run with every right (what scripts/servers.sh must never provision).
func RequireServiceUser(t testing.TB, dsn, serviceDSN string) {
	t.Helper()
	if serviceDSN != dsn {
		return
	}
	if os.Getenv("MYSQL_ADMIN_DSN") != "" {
		t.Fatal("MYSQL_DSN's user is MYSQL_ADMIN_DSN's: the service would run with every right")
	}
	t.Skip("MYSQL_DSN's user is the admin (servers without a service user, no MYSQL_ADMIN_DSN): nothing to check")
}

// WithDSNParam is dsn with the system variable name set to value, which the driver sets on every
// connection it opens, as a server's global setting would be.
func WithDSNParam(t testing.TB, dsn, name, value string) string {
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
