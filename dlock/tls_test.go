package dlock_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// dlock over TLS with digest auth, as docs/interop.md describes it: Debian's ZooKeeper with Netty
// on a secure client port, and WithDialer dialing TLS (go-zookeeper has no TLS of its own).
func TestLockOverTLS(t *testing.T) {
	addr, certPEM := testenv.StartTLSZooKeeper(t)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(certPEM) {
		t.Fatal("no certificate in the PEM")
	}
	dial := func(network, address string, timeout time.Duration) (net.Conn, error) {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
		return d.Dial(network, address)
	}
	c := connect(t, []string{addr}, dlock.WithDialer(dial), dlock.WithDigest(aclUser, aclPassword))
	ctx := ctxTimeout(t, 15*time.Second)
	l, err := dlock.NewMutex(c, "/tls/sku").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// A client that does not trust the server's certificate gets no session.
	untrusting := func(network, address string, timeout time.Duration) (net.Conn, error) {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: &tls.Config{RootCAs: x509.NewCertPool()}}
		return d.Dial(network, address)
	}
	if c, err := dlock.Connect(ctxTimeout(t, 2*time.Second), []string{addr}, dlock.WithDialer(untrusting)); err == nil {
		_ = c.Close()
		t.Fatal("a client that does not trust the certificate connected")
	}
}
