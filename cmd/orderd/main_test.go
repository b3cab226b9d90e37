package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

func TestMain(m *testing.M) { testenv.Main(m, "ZK_SERVERS", "MYSQL_DSN") }

func buildOrderd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "orderd")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestUsageOnBadFlag(t *testing.T) {
	bin := buildOrderd(t)
	out, err := exec.Command(bin, "-lock-mode", "memcached").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2", err)
	}
	if !strings.Contains(string(out), "LOCK_MODE") || !strings.Contains(string(out), "orderd -h") {
		t.Fatalf("message %q does not name the variable and point to -h", out)
	}
}

// Secure by default: without zkstock's ZooKeeper identity, and without the explicit opt-out,
// orderd does not start, and says what to set.
func TestRefusesToStartWithoutAZooKeeperIdentity(t *testing.T) {
	bin := buildOrderd(t)
	cmd := exec.Command(bin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ZK_AUTH") && !strings.HasPrefix(kv, "ZK_OPEN_ACL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2; output %s", err, out)
	}
	for _, want := range []string{"ZK_AUTH=user:password", "ZK_AUTH_FILE", "ZK_OPEN_ACL=true"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("message %q does not name %s", out, want)
		}
	}
}

// SIGTERM under load: in-flight purchases finish, every 201 is an order, every order was answered
// 201 or its client's connection was cut, and no lock node is left behind.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	for _, mode := range []string{"zk", "zk-batch"} {
		t.Run(mode, func(t *testing.T) { testGracefulShutdownUnderLoad(t, mode) })
	}
}

func testGracefulShutdownUnderLoad(t *testing.T, mode string) {
	bin := buildOrderd(t)
	dsn := testenv.MySQLDatabase(t)
	addr := freeAddr(t)
	base := "http://" + addr
	name := testenv.UniqueName(t)
	sku := "SKU-" + name[len(name)-8:] // the random suffix: a lock path no other run uses

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "HTTP_ADDR="+addr, "REPLICA_ID=orderd-test", "ZK_SERVERS="+strings.Join(testenv.ZKServers(t), ","),
		"MYSQL_DSN="+testenv.ServiceDSN(t, dsn), "MYSQL_MIGRATE_DSN="+dsn, "ADMIN_TOKEN=secret", "WORK_DELAY=20ms", "LOCK_TIMEOUT=20s", "LOG_LEVEL=info", "LOCK_MODE="+mode)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var logLines []string
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logLines = append(logLines, sc.Text())
		}
	}()

	hc := &http.Client{Timeout: 30 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("orderd did not become ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
	req, _ := http.NewRequest("PUT", base+"/admin/products/"+sku, strings.NewReader(`{"stock":100000}`))
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("reset: %v %v", resp, err)
	}

	var mu sync.Mutex
	answered := map[string]int{} // idempotency key -> status
	cut := map[string]bool{}     // keys whose request failed in transport
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("g%d-%d", g, i)
				req, _ := http.NewRequest("POST", base+"/v1/orders", strings.NewReader(fmt.Sprintf(`{"sku":%q,"qty":1}`, sku)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", key)
				resp, err := hc.Do(req)
				mu.Lock()
				if err != nil {
					cut[key] = true
				} else {
					answered[key] = resp.StatusCode
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}(g)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { <-logDone; exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("orderd exited with %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("orderd did not exit after SIGTERM")
	}
	close(stop)
	wg.Wait()

	store, err := inventory.Open(context.Background(), dsn, inventory.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	orders, err := store.Orders(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	inDB := map[string]bool{}
	for _, o := range orders {
		key := *o.RequestID
		inDB[key] = true
		if answered[key] != 201 && !cut[key] {
			t.Errorf("order for %s is in the database but its client got %d", key, answered[key])
		}
	}
	created := 0
	for key, status := range answered {
		if status == 201 {
			created++
			if !inDB[key] {
				t.Errorf("%s was answered 201 but has no order", key)
			}
		} else if status != 409 {
			t.Errorf("%s was answered %d", key, status)
		}
	}
	if created == 0 {
		t.Fatal("no purchase succeeded before shutdown")
	}
	a, err := store.Audit(context.Background(), sku)
	if err != nil || a.Oversold != 0 || a.LostUpdates != 0 || int(a.Orders) != len(orders) {
		t.Fatalf("audit %+v %v", a, err)
	}
	t.Logf("%d purchases answered 201, %d requests cut by the shutdown, %d orders in the database", created, len(cut), len(orders))

	conn, _, err := zk.Connect(testenv.ZKServers(t), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if kids, _, err := conn.Children("/zkstock/locks/sku/" + sku); err == nil && len(kids) != 0 {
		t.Fatalf("lock nodes left behind: %v", kids)
	}

	// Purchase lines are JSON with the fields an operator filters on.
	found := false
	for _, line := range logLines {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if m["msg"] == "purchase" {
			found = true
			for _, k := range []string{"replica", "sku", "mode", "token", "request_id"} {
				if _, ok := m[k]; !ok {
					t.Fatalf("purchase log line lacks %q: %s", k, line)
				}
			}
		}
	}
	if !found {
		t.Fatal("no purchase log line")
	}
}

func TestProbe(t *testing.T) {
	bin := buildOrderd(t)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
		}
	}))
	defer ok.Close()
	if err := exec.Command(bin, "probe", ok.URL+"/readyz").Run(); err != nil {
		t.Fatalf("probe of a ready replica: %v", err)
	}
	if err := exec.Command(bin, "probe", ok.URL+"/other").Run(); err == nil {
		t.Fatal("probe of a 404 succeeded")
	}
	if err := exec.Command(bin, "probe", "http://"+freeAddr(t)+"/readyz").Run(); err == nil {
		t.Fatal("probe of nothing succeeded")
	}
}

// A replica whose database user may not create the tables, given no migration user, stops at
// once (not after the start's 30 s of retries) and says which privilege it lacks and what to set.
func TestStartWithoutMigrationRightsSaysSo(t *testing.T) {
	bin := buildOrderd(t)
	fresh := testenv.MySQLDatabase(t)
	svc := testenv.ServiceDSN(t, fresh)
	testenv.RequireServiceUser(t, fresh, svc)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "HTTP_ADDR="+freeAddr(t), "REPLICA_ID=orderd-test", "ZK_SERVERS="+strings.Join(testenv.ZKServers(t), ","),
		"MYSQL_DSN="+svc, "MYSQL_MIGRATE_DSN=", "ADMIN_TOKEN=secret")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("exit %v, want a failure:\n%s", err, out)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("it gave up after %v: a missing privilege is not worth retrying", took)
	}
	if !strings.Contains(string(out), "CREATE command denied") || !strings.Contains(string(out), "MYSQL_MIGRATE_DSN") {
		t.Fatalf("the message does not name the privilege and MYSQL_MIGRATE_DSN:\n%s", out)
	}
}
