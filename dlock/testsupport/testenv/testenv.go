// Package testenv hands tests the addresses of the real ZooKeeper servers that scripts/servers.sh
// started, and starts and breaks ZooKeeper ensembles of a test's own.
//
// Tests never start the shared servers themselves: `make test` provisions them once for every
// package and exports ZK_SERVERS and ZK_ENSEMBLE (and the service's MYSQL_DSN, REDIS_ADDR, which
// the service's internal/testenv reads through Var). Without them a test skips with a hint, except
// under CI=true, where a missing server is a failure.
//
// It is test support for dlock's tests and the service's, not part of dlock's API: it may change
// in any release.
package testenv

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Main runs the package's tests. Without servers it runs nothing and says why (a failure under
// CI=true), so that plain `go test ./...` on a bare machine does not drown in skips.
func Main(m *testing.M, vars ...string) {
	Require(vars...)
	os.Exit(m.Run())
}

// defaultZKAuth is zkstock's ZooKeeper identity in tests run without scripts/servers.sh's env.
const defaultZKAuth = "zkstock:zkstock-test"

// ZKAuth is zkstock's ZooKeeper identity in tests, user and password: ZK_AUTH (scripts/servers.sh
// exports one made for its servers), else a fixed one. Replicas and every test client that writes
// under /zkstock authenticate with it.
func ZKAuth() (user, password string) {
	user, password, _ = strings.Cut(cmp.Or(os.Getenv("ZK_AUTH"), defaultZKAuth), ":")
	return user, password
}

// Require ends the test binary before any test runs when a variable is missing: with success and
// a hint locally, with a failure under CI=true. It exports ZK_AUTH when it is not set, so that
// the replicas a test starts as processes use the identity ZKAuth gives.
func Require(vars ...string) {
	if os.Getenv("ZK_AUTH") == "" {
		if err := os.Setenv("ZK_AUTH", defaultZKAuth); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: set ZK_AUTH:", err)
			os.Exit(1)
		}
	}
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

func list(t testing.TB, name string) []string {
	return strings.Split(Var(t, name), ",")
}

// Var is the environment variable name that scripts/servers.sh exported: without it the test
// skips with a hint, or fails under CI=true.
func Var(t testing.TB, name string) string {
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

// Eventually polls cond every 20 ms until it holds, or fails the test after timeout, saying it
// waited for what.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
