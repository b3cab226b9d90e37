package testenv

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	zkenv "github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// GaleraRequested says whether the run asked for the Galera cluster (ZKSTOCK_GALERA=1, which make
// test-galera sets): a Galera test then fails without one, instead of skipping.
func GaleraRequested() bool { return os.Getenv("ZKSTOCK_GALERA") == "1" }

// galeraList is the comma-separated variable name of scripts/servers.sh --galera, one entry per
// node. Without it the test skips (plain make test starts no cluster), or fails when the run asked
// for the cluster (GaleraRequested).
func galeraList(t testing.TB, name string) []string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if GaleraRequested() {
			t.Fatalf("%s is not set but ZKSTOCK_GALERA=1 asked for the Galera cluster: it did not start (scripts/servers.sh --galera)", name)
		}
		t.Skipf("%s is not set: run make test-galera, or scripts/servers.sh run --galera -- go test ...", name)
	}
	return strings.Split(v, ",")
}

// GaleraServiceDSNs are the service user's DSNs of the cluster's three nodes, on database
// zkstock, in node order (GALERA_DSNS).
func GaleraServiceDSNs(t testing.TB) []string { return galeraList(t, "GALERA_DSNS") }

// GaleraMigrateDSNs are the migration user's DSNs of the three nodes, on database zkstock
// (GALERA_MIGRATE_DSNS).
func GaleraMigrateDSNs(t testing.TB) []string { return galeraList(t, "GALERA_MIGRATE_DSNS") }

// GaleraAdminDSNs are root's DSNs of the three nodes (GALERA_ADMIN_DSNS).
func GaleraAdminDSNs(t testing.TB) []string { return galeraList(t, "GALERA_ADMIN_DSNS") }

// GaleraDatabase creates an empty database for one test on the cluster (on node 1; Galera
// replicates the DDL) and returns root's DSN of it on each node, in node order. The database is
// dropped when the test ends.
func GaleraDatabase(t testing.TB) []string {
	t.Helper()
	nodes := GaleraAdminDSNs(t)
	name := "g_" + strings.ToLower(strings.ReplaceAll(UniqueName(t), "-", "_"))
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	cfg, err := mysql.ParseDSN(nodes[0])
	if err != nil {
		t.Fatalf("GALERA_ADMIN_DSNS: %v", err)
	}
	admin := cfg.Clone()
	admin.DBName = ""
	run := func(q string) error {
		db, err := sql.Open("mysql", admin.FormatDSN())
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.Exec(q)
		return err
	}
	if err := run("CREATE DATABASE `" + name + "`"); err != nil {
		t.Fatalf("create database %s on node 1: %v", name, err)
	}
	t.Cleanup(func() {
		// node 1 may be the one a test killed: any node that answers drops it for all
		for _, n := range nodes {
			c, err := mysql.ParseDSN(n)
			if err != nil {
				continue
			}
			c.DBName = ""
			c.Timeout = 2 * time.Second
			db, err := sql.Open("mysql", c.FormatDSN())
			if err != nil {
				continue
			}
			_, err = db.Exec("DROP DATABASE IF EXISTS `" + name + "`")
			_ = db.Close()
			if err == nil {
				return
			}
		}
		t.Logf("database %s: no node dropped it", name)
	})
	out := make([]string, len(nodes))
	for i, n := range nodes {
		c, err := mysql.ParseDSN(n)
		if err != nil {
			t.Fatalf("GALERA_ADMIN_DSNS: %v", err)
		}
		c.DBName = name
		out[i] = c.FormatDSN()
	}
	return out
}

// GaleraControl runs scripts/galera.sh CMD on the cluster (GALERA_DIR) with args (a node's number,
// 1 to 3, for the node controls) and returns what it printed on stdout (the seconds a wait took).
// A failure fails the test.
func GaleraControl(t testing.TB, cmd string, args ...string) string {
	t.Helper()
	out, err := GaleraRun(t, cmd, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// GaleraRun is GaleraControl for a caller that goes on after a failure (the nemesis, which notes
// it and heals what else it broke): the error holds what the script printed.
func GaleraRun(t testing.TB, cmd string, args ...string) (string, error) {
	t.Helper()
	dir := galeraList(t, "GALERA_DIR")[0]
	script := zkenv.Script(t, "galera.sh")
	c := exec.Command(script, append([]string{cmd, dir}, args...)...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("galera.sh %s %v: %w\n%s%s", cmd, args, err, out, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// GaleraNode is the node number (1 to 3) of a DSN of GaleraDatabase's or GaleraServiceDSNs', by its
// address.
func GaleraNode(t testing.TB, dsn string) string {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range GaleraAdminDSNs(t) {
		a, err := mysql.ParseDSN(n)
		if err == nil && a.Addr == c.Addr {
			return fmt.Sprint(i + 1)
		}
	}
	t.Fatalf("%s is no node of the cluster", c.Addr)
	return ""
}
