// Package testenv hands tests the addresses of the real servers that scripts/servers.sh started:
// ZooKeeper, MariaDB and Redis.
//
// Tests never start servers themselves: `make test` provisions them once for every package and
// exports ZK_SERVERS, ZK_ENSEMBLE and MYSQL_DSN. Without them a test skips with a hint, except
// under CI=true, where a missing server is a failure.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Main runs the package's tests. Without servers it runs nothing and says why (a failure under
// CI=true), so that plain `go test ./...` on a bare machine does not drown in skips.
func Main(m *testing.M, vars ...string) {
	Require(vars...)
	os.Exit(m.Run())
}

// Require ends the test binary before any test runs when a variable is missing: with success and
// a hint locally, with a failure under CI=true.
func Require(vars ...string) {
	for _, v := range vars {
		if os.Getenv(v) == "" {
			msg := fmt.Sprintf("%s is not set: run `make test`, or scripts/servers.sh run -- go test ./...", v)
			if InCI() {
				fmt.Fprintln(os.Stderr, "FAIL: "+msg)
				os.Exit(1)
			}
			fmt.Fprintln(os.Stderr, "skipping package: "+msg)
			os.Exit(0)
		}
	}
}

// InCI reports whether missing servers must fail the run rather than skip it.
func InCI() bool { return os.Getenv("CI") == "true" }

// ZKServers is the standalone ZooKeeper (tickTime 500 ms, so 1 s sessions are allowed).
func ZKServers(t testing.TB) []string { return list(t, "ZK_SERVERS") }

// ZKEnsemble is the three-peer ZooKeeper quorum.
func ZKEnsemble(t testing.TB) []string { return list(t, "ZK_ENSEMBLE") }

// RedisAddr is the Redis (persistence off) of the redis lock modes.
func RedisAddr(t testing.TB) string { return value(t, "REDIS_ADDR") }

// RedisUser is the redis modes' ACL user and its password (REDIS_USERNAME, REDIS_PASSWORD; both
// empty on a Redis without ACL users).
func RedisUser() (username, password string) {
	return os.Getenv("REDIS_USERNAME"), os.Getenv("REDIS_PASSWORD")
}

// RedisAdminPassword is the password of Redis's default user, which may run every command
// (REDIS_ADMIN_PASSWORD; empty on a Redis without one).
func RedisAdminPassword() string { return os.Getenv("REDIS_ADMIN_PASSWORD") }

// MySQLDSN is the MariaDB DSN of the database zkstock, as the service's user (rows only).
func MySQLDSN(t testing.TB) string { return value(t, "MYSQL_DSN") }

func list(t testing.TB, name string) []string {
	return strings.Split(value(t, name), ",")
}

func value(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if InCI() {
			t.Fatalf("%s is not set (CI=true): the servers were not provisioned", name)
		}
		t.Skipf("%s is not set: run `make test`", name)
	}
	return v
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// UniquePath is a ZooKeeper path no other test (or earlier run) uses.
func UniquePath(t testing.TB) string {
	return "/zkstock-test/" + UniqueName(t)
}

// UniqueName is the test's name, made safe for paths and identifiers, with a random suffix.
func UniqueName(t testing.TB) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random: %v", err)
	}
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return name + "-" + hex.EncodeToString(b[:])
}
