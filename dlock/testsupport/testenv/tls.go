package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// StartTLSZooKeeper starts a standalone ZooKeeper (scripts/servers.sh start-server) that serves
// clients over TLS on its secure port, with Netty and a certificate for 127.0.0.1 made here, and
// stops it when the test ends. It returns the secure port's address and the certificate, in PEM,
// for the client to trust.
func StartTLSZooKeeper(t testing.TB) (addr string, certPEM []byte) {
	t.Helper()
	dir := t.TempDir()
	if base := os.Getenv("ZKSTOCK_SERVERS_DIR"); base != "" { // stopped with the run if the test dies
		var err error
		if dir, err = os.MkdirTemp(base, "tls-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	taken := map[int]bool{}
	plain, secure := freePort(t, taken), freePort(t, taken)
	cfg := fmt.Sprintf(`tickTime=500
dataDir=%s/data
clientPortAddress=127.0.0.1
clientPort=%d
secureClientPort=%d
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=%s/key.pem
ssl.keyStore.type=PEM
ssl.trustStore.location=%s/cert.pem
ssl.trustStore.type=PEM
ssl.clientAuth=none
4lw.commands.whitelist=*
admin.enableServer=false
`, dir, plain, secure, dir, dir)
	files := map[string][]byte{
		"zoo.cfg":  []byte(cfg),
		"main":     []byte("org.apache.zookeeper.server.ZooKeeperServerMain\n"),
		"key.pem":  append(append([]byte{}, keyPEM...), certPEM...),
		"cert.pem": certPEM,
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { ServersScript(t, "stop-server", dir) })
	ServersScript(t, "start-server", dir)
	WaitZKMode(t, fmt.Sprintf("127.0.0.1:%d", plain), time.Minute, "standalone")
	return fmt.Sprintf("127.0.0.1:%d", secure), certPEM
}
