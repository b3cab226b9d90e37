// Package tcpproxy is dlock's loopback TCP proxy for tests
// (github.com/zkstock/zkstock/dlock/testsupport/tcpproxy), named again for the service's tests,
// with what only they need: a proxied MySQL DSN.
package tcpproxy

import (
	"testing"

	"github.com/go-sql-driver/mysql"

	proxy "github.com/zkstock/zkstock/dlock/testsupport/tcpproxy"
)

// Proxy forwards connections from Addr to its target until Cut; see dlock's tcpproxy.
type Proxy = proxy.Proxy

var (
	New      = proxy.New
	NewMySQL = proxy.NewMySQL
	NewRaw   = proxy.NewRaw
)

// ProxiedDSN starts a MySQL proxy to the server of dsn and returns it with a DSN that reaches
// the same database through it; edit, if given, changes that DSN further (a read timeout, say).
func ProxiedDSN(t testing.TB, dsn string, edit func(*mysql.Config)) (*Proxy, string) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("proxy: parse DSN: %v", err)
	}
	p := NewMySQL(t, cfg.Addr)
	proxied := cfg.Clone()
	proxied.Addr = p.Addr()
	if edit != nil {
		edit(proxied)
	}
	return p, proxied.FormatDSN()
}
