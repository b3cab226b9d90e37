package composetest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/loadtest"
)

// The Galera nodes' compose services, in node order (the mysql service is node 1, galera1).
var galeraNodes = []string{"mysql", "galera2", "galera3"}

// nodeSQL runs a statement as root on a Galera node, inside its container, and returns its
// tab-separated output ("" and false when the node does not answer).
func nodeSQL(t testing.TB, s *stack, service, stmt string) (string, bool) {
	t.Helper()
	cmd := exec.Command("docker", "exec", s.container(t, service), "sh", "-c",
		`MYSQL_PWD="$(cat /run/secrets/mysql_root_password)" exec timeout 10 mariadb -uroot -h127.0.0.1 -NB -e "$1"`, "sh", stmt)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Logf("%s on %s: %v %s", stmt, service, err, strings.TrimSpace(stderr.String()))
		return "", false
	}
	return strings.TrimSpace(out.String()), true
}

func nodeStatus(t testing.TB, s *stack, service, variable string) string {
	t.Helper()
	out, _ := nodeSQL(t, s, service, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = '"+strings.ToUpper(variable)+"'")
	return out
}

// serviceConns is how many connections the replicas' database user (zkstock) has on a node.
func serviceConns(t testing.TB, s *stack, service string) int {
	t.Helper()
	out, ok := nodeSQL(t, s, service, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'zkstock'")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("connections on %s: %q: %v", service, out, err)
	}
	return n
}

// transferOf says how a restarted node caught up, from its log: IST or a full SST.
func transferOf(t testing.TB, s *stack, service string) string {
	t.Helper()
	out, err := exec.Command("docker", "logs", s.container(t, service)).CombinedOutput()
	if err != nil {
		t.Fatalf("logs of %s: %v", service, err)
	}
	// The log holds the node's earlier starts too: the last word counts. The joiner's SST script
	// runs either way and says which it was.
	ist := max(strings.LastIndex(string(out), "mariabackup IST completed on joiner"), strings.LastIndex(string(out), "Receiving IST"))
	sst := strings.LastIndex(string(out), "mariabackup SST completed on joiner")
	switch {
	case ist > sst:
		return "by IST"
	case sst >= 0:
		return "by a full SST"
	}
	return "no transfer logged"
}

// docker-compose.galera.yml: the stock on a three-node MariaDB Galera cluster. The cluster forms
// (node 1 bootstraps it, the others join by a full state transfer), the replicas migrate the schema
// through it and sell, and the container of the node they write through (MYSQL_NODES' writer: the
// node with most of their connections) is killed under load: they move to another node and the
// shop keeps selling, every sale counted.
func TestGalera(t *testing.T) {
	s := newStack(t, "docker-compose.yml", "docker-compose.galera.yml")
	for _, n := range galeraNodes {
		if st, size := nodeStatus(t, s, n, "wsrep_local_state_comment"), nodeStatus(t, s, n, "wsrep_cluster_size"); st != "Synced" || size != "3" {
			t.Fatalf("%s: %s in a cluster of %s, want Synced in a cluster of 3", n, st, size)
		}
	}
	// The migration ran through one node; its tables are on every node.
	for _, n := range galeraNodes {
		if out, _ := nodeSQL(t, s, n, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'zkstock' AND TABLE_NAME IN ('products', 'orders')"); out != "2" {
			t.Fatalf("%s: %q of the tables products and orders, want 2", n, out)
		}
	}
	// A purchase on each replica, seen on the node farthest from node 1.
	const sku = "GALERA-1"
	reset(t, sku, 10)
	setMode(t, "zk", replicas...)
	for i, r := range replicas {
		st, m := call(t, http.MethodPost, r+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku))
		if st != http.StatusCreated || m["remaining"] != float64(10-(i+1)) {
			t.Fatalf("purchase on %s: %d %v", r, st, m)
		}
	}
	if out, _ := nodeSQL(t, s, "galera3", "SET SESSION wsrep_sync_wait = 1; SELECT stock FROM zkstock.products WHERE sku = '"+sku+"'"); out != "7" {
		t.Fatalf("the stock on galera3: %q, want 7", out)
	}

	// The writer's node killed under load. The writer: the node that holds the replicas'
	// connections after the purchases above (the others have none, or only a monitor's).
	conns := map[string]int{}
	writer := ""
	for _, n := range galeraNodes {
		conns[n] = serviceConns(t, s, n)
		if writer == "" || conns[n] > conns[writer] {
			writer = n
		}
	}
	victim := writer
	if conns[writer] == 0 {
		t.Fatalf("no node serves the replicas: their connections per node %v", conns)
	}
	const loadSKU, stock = "GALERA-KILL-1", 500
	reset(t, loadSKU, stock)
	l := startLoad(t, loadtest.Config{SKU: loadSKU, Stock: stock, Requests: 1000, Concurrency: 20, Modes: []string{"zk"}})
	waitFor(t, 30*time.Second, "50 sold", func() bool { return auditOf(t, replicas[0], loadSKU).UnitsSold >= 50 })
	docker(t, "kill", s.container(t, victim))
	killedAt := time.Since(l.start)
	row := l.wait(t)[0]
	exact(t, row, stock)
	gap, gapAt := longestGap(row)
	// The shop sold after the kill: the first sale after it, and how many.
	var after int
	firstAfter := time.Duration(-1)
	for _, sale := range row.Sales {
		at := time.Duration(sale.AtMillis * float64(time.Millisecond))
		if at > killedAt {
			if after == 0 {
				firstAfter = at - killedAt
			}
			after++
		}
	}
	if after == 0 {
		t.Fatalf("nothing sold after %s was killed %.1f s into the load: %s", victim, killedAt.Seconds(), summary(row))
	}
	var survivors []string
	for _, n := range galeraNodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	waitFor(t, 30*time.Second, "the survivors a primary component of 2", func() bool {
		return nodeStatus(t, s, survivors[0], "wsrep_cluster_size") == "2" && nodeStatus(t, s, survivors[0], "wsrep_cluster_status") == "Primary"
	})
	// Sells afterwards, through every replica.
	reset(t, sku, 3)
	for _, r := range replicas {
		if st, m := call(t, http.MethodPost, r+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku)); st != http.StatusCreated {
			t.Fatalf("purchase on %s after %s was killed: %d %v", r, victim, st, m)
		}
	}
	// The killed node started again: it recovers its position and rejoins (IST from a survivor).
	restartedAt := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := s.compose(ctx, "up", "-d", "--no-build", victim); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s.waitHealthy(t, ctx, victim)
	rejoined := time.Since(restartedAt)
	if size := nodeStatus(t, s, victim, "wsrep_cluster_size"); size != "3" {
		t.Fatalf("%s restarted: in a cluster of %s, want 3", victim, size)
	}
	if out, _ := nodeSQL(t, s, victim, "SET SESSION wsrep_sync_wait = 1; SELECT stock FROM zkstock.products WHERE sku = '"+sku+"'"); out != "0" {
		t.Fatalf("the stock on %s after it rejoined: %q, want 0", victim, out)
	}
	record(t, "docker-compose.galera.yml: three nodes Synced and every service healthy %.0f s after `up` (node 1 bootstraps, galera2 then galera3 join by mariabackup SST); schema migrated through the cluster, on every node; a purchase on each replica, seen on galera3. `docker kill` of %s, the replicas' writer (their connections per node: %v), after 50 sales, %.1f s into the load: the first sale after it %.2f s later, %d sold after it; the longest pause between two sales %.2f s (from %.1f s); %d of %d sold, %d errors %v, oversold 0, lost updates 0; the two left a primary component, every replica selling; %s started again (`up -d`), Synced in the cluster of 3 %.1f s later (%s)",
		s.upTook.Seconds(), victim, conns, killedAt.Seconds(), firstAfter.Seconds(), after, gap.Seconds(), gapAt.Seconds(), row.Orders, stock, row.Errors, row.ErrorCodes,
		victim, rejoined.Seconds(), transferOf(t, s, victim))
}
