package order_test

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/order"
)

// env is an environment of m's variables; one that sets no ZooKeeper identity and no opt-out gets
// one (zkauth_test.go tests those).
func env(m map[string]string) func(string) string {
	if m["ZK_AUTH"] == "" && m["ZK_AUTH_FILE"] == "" && m["ZK_OPEN_ACL"] == "" {
		m = maps.Clone(m)
		if m == nil {
			m = map[string]string{}
		}
		m["ZK_AUTH"] = "zkstock:config-test"
	}
	return func(k string) string { return m[k] }
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := order.LoadConfig(nil, env(map[string]string{"REPLICA_ID": "order1"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != ":8080" || cfg.LockMode != order.ModeZK || cfg.LockTimeout != 5*time.Second || cfg.WorkDelay != 0 ||
		cfg.ZKSessionTimeout != 10*time.Second || strings.Join(cfg.ZKServers, ",") != "127.0.0.1:2181" || cfg.AdminToken != "" ||
		cfg.MySQLDSN != "zkstock@tcp(127.0.0.1:3306)/zkstock?parseTime=true" || cfg.MySQLMigrateDSN != "" || cfg.LogLevel != slog.LevelInfo {
		t.Fatalf("defaults %+v", cfg)
	}
	if few, err := order.LoadConfig(nil, env(map[string]string{"REPLICA_ID": "order1", "EVENT_STREAMS": "8"}), io.Discard); err != nil || few.EventStreamsPerClient != 8 {
		t.Fatalf("EVENT_STREAMS 8: streams per client %d, %v; want all 8", few.EventStreamsPerClient, err)
	}
	if cfg.ConnsPerClient != 1024 || cfg.EventStreamsPerClient != 16 || cfg.KeyLookupRate != 100 || cfg.KeyLookupBurst != 1000 ||
		cfg.CancelRate != 100 || cfg.CancelBurst != 1000 {
		t.Fatalf("the per-client bounds' defaults %+v", cfg)
	}
}

func TestLoadConfigFlagsOverrideEnvironment(t *testing.T) {
	e := env(map[string]string{"REPLICA_ID": "order1", "LOCK_MODE": "none", "WORK_DELAY": "5ms", "ZK_SERVERS": "a:1, b:2", "LOG_LEVEL": "debug"})
	cfg, err := order.LoadConfig([]string{"-lock-mode", "zk-unfenced", "-lock-timeout", "2s"}, e, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LockMode != order.ModeZKUnfenced || cfg.LockTimeout != 2*time.Second || cfg.WorkDelay != 5*time.Millisecond ||
		strings.Join(cfg.ZKServers, ",") != "a:1,b:2" || cfg.LogLevel != slog.LevelDebug {
		t.Fatalf("config %+v", cfg)
	}
}

func TestLoadConfigRejectsBadValues(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"LOCK_MODE":                {"LOCK_MODE": "memcached"},
		"REDIS_LOCK_TTL":           {"REDIS_LOCK_TTL": "5ms"},
		"LOCK_TIMEOUT":             {"LOCK_TIMEOUT": "soon"},
		"WORK_DELAY":               {"WORK_DELAY": "-1s"},
		"ZK_SESSION_TIMEOUT":       {"ZK_SESSION_TIMEOUT": "10ms"},
		"ZK_SERVERS":               {"ZK_SERVERS": " , "},
		"REPLICA_ID":               {"REPLICA_ID": "a/b"},
		"LOG_LEVEL":                {"LOG_LEVEL": "loud"},
		"CONNS_PER_CLIENT":         {"CONNS_PER_CLIENT": "0"},
		"EVENT_STREAMS_PER_CLIENT": {"EVENT_STREAMS": "8", "EVENT_STREAMS_PER_CLIENT": "9"},
		"KEY_LOOKUP_RATE":          {"KEY_LOOKUP_RATE": "0"},
		"KEY_LOOKUP_BURST":         {"KEY_LOOKUP_BURST": "many"},
		"CANCEL_RATE":              {"CANCEL_RATE": "NaN"},
		"CANCEL_BURST":             {"CANCEL_BURST": "0"},
	} {
		if vars["REPLICA_ID"] == "" {
			vars["REPLICA_ID"] = "order1"
		}
		_, err := order.LoadConfig(nil, env(vars), io.Discard)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name the variable", name, err)
		}
	}
	// Work longer than the database lets a transaction sit silent.
	if _, err := order.LoadConfig(nil, env(map[string]string{"REPLICA_ID": "order1", "WORK_DELAY": "30s"}), io.Discard); err == nil ||
		!strings.Contains(err.Error(), "WORK_DELAY") {
		t.Errorf("WORK_DELAY 30s: %v", err)
	}
	if _, err := order.LoadConfig([]string{"-h"}, env(nil), io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	if _, err := order.LoadConfig([]string{"extra"}, env(map[string]string{"REPLICA_ID": "x"}), io.Discard); err == nil {
		t.Error("stray argument accepted")
	}
}

func TestLoadConfigPprofAddr(t *testing.T) {
	for addr, ok := range map[string]bool{
		"": true, "127.0.0.1:6060": true, "localhost:6060": true, "[::1]:6060": true, "10.1.2.3:6060": true,
		":6060": false, "0.0.0.0:6060": false, "[::]:6060": false, "127.0.0.1": false,
	} {
		cfg, err := order.LoadConfig(nil, env(map[string]string{"REPLICA_ID": "order1", "PPROF_ADDR": addr}), io.Discard)
		if ok != (err == nil) || (ok && cfg.PprofAddr != addr) {
			t.Errorf("PPROF_ADDR %q: %+v, %v", addr, cfg.PprofAddr, err)
		}
		if !ok && !strings.Contains(err.Error(), "PPROF_ADDR") {
			t.Errorf("PPROF_ADDR %q: error %v does not name the variable", addr, err)
		}
	}
}

// The default REPLICA_ID is the host name made valid, whatever the host is called: LoadConfig
// accepts it, and names that are valid already are kept as they are.
func TestReplicaIDFromHostIsValidForAnyHostName(t *testing.T) {
	long := strings.Repeat("a", 70) + ".example.com"
	for host, want := range map[string]string{
		"ip-10-0-0-1.ec2.internal":   "ip-10-0-0-1-ec2-internal",
		"order1":                     "order1",
		"web_2":                      "web_2",
		"":                           "orderd",
		"host with spaces/and:colon": "host-with-spaces-and-colon",
		"bücher.例え.jp":               "b-cher----jp",
		"..":                         "--",
		long:                         strings.Repeat("a", 64),
		"x\n\x00y":                   "x--y",
	} {
		got := order.ReplicaIDFromHost(host)
		if got != want {
			t.Errorf("ReplicaIDFromHost(%q) = %q, want %q", host, got, want)
		}
		cfg, err := order.LoadConfig([]string{"-replica-id", got}, env(nil), io.Discard)
		if err != nil {
			t.Errorf("host %q: LoadConfig refuses its default %q: %v", host, got, err)
		} else if cfg.ReplicaID != got {
			t.Errorf("host %q: replica id %q, want %q", host, cfg.ReplicaID, got)
		}
	}
}

// -h never prints a secret the environment holds (ZK_AUTH, ADMIN_TOKEN, a password in
// MYSQL_DSN), while the environment still sets them and a flag still overrides it.
func TestUsageHidesSecretsFromTheEnvironment(t *testing.T) {
	vars := map[string]string{"REPLICA_ID": "order1", "ZK_AUTH": "zkstock:zk-s3cret", "ADMIN_TOKEN": "admin-s3cret",
		"MYSQL_DSN": "svc:db-s3cret@tcp(db:3306)/zkstock"}
	var usage strings.Builder
	if _, err := order.LoadConfig([]string{"-h"}, env(vars), &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, secret := range []string{"zk-s3cret", "admin-s3cret", "db-s3cret"} {
		if strings.Contains(usage.String(), secret) {
			t.Errorf("-h prints the secret %q", secret)
		}
	}
	if !strings.Contains(usage.String(), "zkstock@tcp(127.0.0.1:3306)/zkstock?parseTime=true") {
		t.Error("-h no longer shows MYSQL_DSN's default")
	}
	cfg, err := order.LoadConfig(nil, env(vars), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ZKAuth.Password != "zk-s3cret" || cfg.AdminToken != "admin-s3cret" || cfg.MySQLDSN != vars["MYSQL_DSN"] {
		t.Errorf("the environment's secrets are not applied: %+v", cfg)
	}
	cfg, err = order.LoadConfig([]string{"-admin-token", "flag-token", "-mysql-dsn", "u@tcp(x:1)/z"}, env(vars), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AdminToken != "flag-token" || cfg.MySQLDSN != "u@tcp(x:1)/z" {
		t.Errorf("a flag does not override the environment: %+v", cfg)
	}
}

// Every secret can come from a file (NAME_FILE, as the official images read theirs), its trailing
// line break trimmed; both a value and a file, an empty file or a missing one is refused by name.
func TestLoadConfigSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	vars := map[string]string{"REPLICA_ID": "order1",
		"MYSQL_DSN_FILE":         write("dsn", "svc:pw@tcp(db:3306)/zkstock\n"),
		"MYSQL_MIGRATE_DSN_FILE": write("mdsn", "mig:pw2@tcp(db:3306)/zkstock\r\n"),
		"ADMIN_TOKEN_FILE":       write("token", "s3cret\n"),
		"REDIS_USERNAME":         "zkstock",
		"REDIS_PASSWORD_FILE":    write("redis", "rpw"),
	}
	cfg, err := order.LoadConfig(nil, env(vars), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MySQLDSN != "svc:pw@tcp(db:3306)/zkstock" || cfg.MySQLMigrateDSN != "mig:pw2@tcp(db:3306)/zkstock" ||
		cfg.AdminToken != "s3cret" || cfg.RedisUsername != "zkstock" || cfg.RedisPassword != "rpw" {
		t.Fatalf("config %+v", cfg)
	}
	// The flags name files too.
	cfg, err = order.LoadConfig([]string{"-admin-token-file", vars["ADMIN_TOKEN_FILE"], "-mysql-dsn-file", vars["MYSQL_DSN_FILE"]},
		env(map[string]string{"REPLICA_ID": "order1"}), io.Discard)
	if err != nil || cfg.AdminToken != "s3cret" || cfg.MySQLDSN != "svc:pw@tcp(db:3306)/zkstock" {
		t.Fatalf("flags: %+v, %v", cfg, err)
	}
	empty := write("empty", "\n")
	for name, extra := range map[string]map[string]string{
		"ADMIN_TOKEN":       {"ADMIN_TOKEN": "x", "ADMIN_TOKEN_FILE": vars["ADMIN_TOKEN_FILE"]},
		"MYSQL_DSN":         {"MYSQL_DSN": "a@tcp(b)/c", "MYSQL_DSN_FILE": vars["MYSQL_DSN_FILE"]},
		"REDIS_PASSWORD":    {"REDIS_PASSWORD_FILE": dir + "/missing"},
		"MYSQL_MIGRATE_DSN": {"MYSQL_MIGRATE_DSN_FILE": empty},
	} {
		extra["REPLICA_ID"] = "order1"
		if _, err := order.LoadConfig(nil, env(extra), io.Discard); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name the setting", name, err)
		}
	}
}

// MYSQL_NODES lists a cluster's nodes; each node's DSN is MYSQL_DSN's (and MYSQL_MIGRATE_DSN's)
// at the node's address, the credentials and parameters given once. Bad lists are refused with
// the variable and the entry named.
func TestLoadConfigMySQLNodes(t *testing.T) {
	vars := map[string]string{"REPLICA_ID": "order1", "MYSQL_DSN": "svc:pw@tcp(db:3306)/zkstock?parseTime=true&wsrep_sync_wait=1",
		"MYSQL_MIGRATE_DSN": "mig:pw2@tcp(db:3306)/zkstock", "MYSQL_NODES": " g1:3306, g2:3307 ,[::1]:3308"}
	cfg, err := order.LoadConfig(nil, env(vars), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.MySQLNodes, ",") != "g1:3306,g2:3307,[::1]:3308" {
		t.Fatalf("nodes %q", cfg.MySQLNodes)
	}
	dsns, err := order.NodeDSNs(cfg.MySQLDSN, cfg.MySQLNodes)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"svc:pw@tcp(g1:3306)/zkstock?parseTime=true&wsrep_sync_wait=1", "svc:pw@tcp(g2:3307)/zkstock?parseTime=true&wsrep_sync_wait=1",
		"svc:pw@tcp([::1]:3308)/zkstock?parseTime=true&wsrep_sync_wait=1"}
	if strings.Join(dsns, " ") != strings.Join(want, " ") {
		t.Fatalf("node DSNs\n%q\nwant\n%q", dsns, want)
	}
	if m, err := order.NodeDSNs(cfg.MySQLMigrateDSN, cfg.MySQLNodes); err != nil || m[1] != "mig:pw2@tcp(g2:3307)/zkstock" {
		t.Fatalf("migration DSNs %q, %v", m, err)
	}
	if cfg, err := order.LoadConfig([]string{"-mysql-nodes", "h:1"}, env(map[string]string{"REPLICA_ID": "order1"}), io.Discard); err != nil ||
		len(cfg.MySQLNodes) != 1 {
		t.Fatalf("-mysql-nodes h:1: %+v, %v", cfg.MySQLNodes, err)
	}
	if cfg, err := order.LoadConfig(nil, env(map[string]string{"REPLICA_ID": "order1"}), io.Discard); err != nil || cfg.MySQLNodes != nil {
		t.Fatalf("no MYSQL_NODES: %q, %v; want none (one server)", cfg.MySQLNodes, err)
	}
	for list, want := range map[string]string{
		"g1:3306,,g2:3306":   "entry 2",
		"g1:3306,":           "entry 2",
		"g1":                 "not host:port",
		"g1:":                "needs a host and a port",
		":3306":              "needs a host and a port",
		"g1:x":               "port must be a number",
		"g1:3306,g1:3306":    "listed twice",
		"g1:3306 , g2:99999": "port must be a number",
	} {
		bad := maps.Clone(vars)
		bad["MYSQL_NODES"] = list
		_, err := order.LoadConfig(nil, env(bad), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "MYSQL_NODES") || !strings.Contains(err.Error(), want) {
			t.Errorf("MYSQL_NODES=%q: %v, want an error naming it and %q", list, err, want)
		}
	}
	sock := maps.Clone(vars)
	sock["MYSQL_DSN"] = "svc:pw@unix(/run/mysqld/mysqld.sock)/zkstock"
	if _, err := order.LoadConfig(nil, env(sock), io.Discard); err == nil || !strings.Contains(err.Error(), "MYSQL_DSN") {
		t.Errorf("MYSQL_NODES with a unix-socket MYSQL_DSN: %v, want refused", err)
	}
}
