// Package testenv hands the service's tests the addresses of the real servers that
// scripts/servers.sh started: ZooKeeper, MariaDB and Redis, and a browser.
//
// The ZooKeeper part is dlock's (github.com/zkstock/zkstock/dlock/testsupport/testenv), which
// dlock's own module tests with; this package names it again so that a test reaches every server
// through one import. What only the service needs (MariaDB, Redis, Chromium) lives here.
package testenv

import (
	"os"
	"os/exec"
	"testing"

	zkenv "github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// The ZooKeeper servers, ensembles and names of dlock's testenv; see there for each contract.
type (
	EnsembleTiming  = zkenv.EnsembleTiming
	ProxiedEnsemble = zkenv.ProxiedEnsemble
)

var (
	Main                  = zkenv.Main
	Require               = zkenv.Require
	InCI                  = zkenv.InCI
	ZKServers             = zkenv.ZKServers
	ZKEnsemble            = zkenv.ZKEnsemble
	UniquePath            = zkenv.UniquePath
	UniqueName            = zkenv.UniqueName
	WatchesUnder          = zkenv.WatchesUnder
	DeleteZKTreeAtCleanup = zkenv.DeleteZKTreeAtCleanup
	StartProxiedEnsemble  = zkenv.StartProxiedEnsemble
	NewProxiedEnsemble    = zkenv.NewProxiedEnsemble
	ZKLeader              = zkenv.ZKLeader
	ZKMode                = zkenv.ZKMode
	WaitZKMode            = zkenv.WaitZKMode
	ServersScript         = zkenv.ServersScript
	ZKAuth                = zkenv.ZKAuth
	ZKConn                = zkenv.ZKConn
	StartTLSZooKeeper     = zkenv.StartTLSZooKeeper
	FreeAddr              = zkenv.FreeAddr
)

// RedisAddr is the Redis (persistence off) of the redis lock modes.
func RedisAddr(t testing.TB) string { return zkenv.Var(t, "REDIS_ADDR") }

// RedisUser is the redis modes' ACL user and its password (REDIS_USERNAME, REDIS_PASSWORD; both
// empty on a Redis without ACL users).
func RedisUser() (username, password string) {
	return os.Getenv("REDIS_USERNAME"), os.Getenv("REDIS_PASSWORD")
}

// RedisAdminPassword is the password of Redis's default user, which may run every command
// (REDIS_ADMIN_PASSWORD; empty on a Redis without one).
func RedisAdminPassword() string { return os.Getenv("REDIS_ADMIN_PASSWORD") }

// MySQLDSN is the MariaDB DSN of the database zkstock, as the service's user (rows only).
func MySQLDSN(t testing.TB) string { return zkenv.Var(t, "MYSQL_DSN") }

// Chromium is Debian's headless browser: its path, or the test skips (fails under CI=true).
func Chromium(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if InCI() {
			t.Fatal("chromium is not installed (CI=true): scripts/ensure-tools.sh installs it")
		}
		t.Skip("chromium is not installed: run scripts/ensure-tools.sh")
	}
	return bin
}
