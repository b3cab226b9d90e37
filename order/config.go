// Package order is the order service's HTTP shell: a Gin API around the sale engine (package
// sale), which sells stock kept by package inventory under each lock mode's locks. The shell
// parses requests, answers the engine's errors by one table (answers.go), serves the live page,
// and reads the configuration and starts a replica.
package order

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/sale"
)

// LockMode is how changes are coordinated between replicas: a row of the sale engine's table.
type LockMode = sale.LockMode

// The lock modes (sale's), in the order the docs show them.
const (
	ModeZK          = sale.ModeZK
	ModeZKUnfenced  = sale.ModeZKUnfenced
	ModeNone        = sale.ModeNone
	ModeZKHerd      = sale.ModeZKHerd
	ModeDBForUpdate = sale.ModeDBForUpdate
	ModeDBCAS       = sale.ModeDBCAS
	ModeDBLockTable = sale.ModeDBLockTable
	ModeZKBatch     = sale.ModeZKBatch
	ModeRedis       = sale.ModeRedis
	ModeRedisFenced = sale.ModeRedisFenced
)

// LockModes lists the modes in the order the docs show them.
var LockModes = sale.LockModes

// ParseLockMode accepts one of LockModes.
func ParseLockMode(s string) (LockMode, error) { return sale.ParseLockMode(s) }

// Config is the service's configuration; every field has an environment variable and a flag.
type Config struct {
	HTTPAddr         string
	ReplicaID        string
	ZKServers        []string
	ZKSessionTimeout time.Duration
	MySQLDSN         string // the service's user: reads and writes rows (MYSQL_DSN or MYSQL_DSN_FILE)
	// MySQLMigrateDSN is the user that creates and alters the tables at start; empty: MySQLDSN's
	// user migrates, and a start fails with the privilege it lacks named (MYSQL_MIGRATE_DSN[_FILE]).
	MySQLMigrateDSN string
	// MySQLNodes are the database's nodes (host:port), when it is a cluster (MYSQL_NODES): each
	// node is reached with MySQLDSN (and MySQLMigrateDSN) at its address (NodeDSNs). Empty: the
	// one server of MySQLDSN.
	MySQLNodes    []string
	LockMode      LockMode // the mode a fleet that has none starts in; the fleet's mode wins (fleet.go)
	LockTimeout   time.Duration
	WorkDelay     time.Duration
	AdminToken    string
	LogLevel      slog.Level
	RedisAddr     string        // the Redis of the redis modes
	RedisUsername string        // the Redis ACL user; empty: the default user (REDIS_USERNAME)
	RedisPassword string        // its password (REDIS_PASSWORD or REDIS_PASSWORD_FILE)
	RedisLockTTL  time.Duration // the Redis lock's expiry, extended every third of it while held
	EventStreams  int           // the most live-page streams (GET /v1/events) open at once; 0: 64
	PprofAddr     string        // where Go's pprof handlers listen; empty: nowhere (see CheckPprofAddr)
	// Fleet names the fleet this replica belongs to: its lock mode and members live under
	// FleetRoot/<Fleet> in ZooKeeper. Replicas of one fleet run one mode.
	Fleet string
	// SwitchTimeout bounds how long a switch of the fleet's mode waits for the fleet to let go of
	// the old one; 0: the longest change plus the ZooKeeper session timeout (switchBound).
	SwitchTimeout time.Duration
	// QueueBudget is the longest wait for a SKU's lock a purchase is admitted to; one foreseen to
	// wait longer is refused at once with 503 sku_busy and Retry-After (sale/admission.go). 0: half
	// the lock timeout, so that a purchase admitted gets its turn before its lock wait times out
	// even when the estimate errs.
	QueueBudget time.Duration
	// ZKAuth is zkstock's ZooKeeper identity (ZK_AUTH, ZK_AUTH_FILE): the nodes the replica
	// creates are writable by it alone, readable by all (zkauth.go). Zero only with ZKOpenACL.
	ZKAuth ZKAuth
	// ZKOpenACL (ZK_OPEN_ACL=true) runs without an identity, every node open to every client of
	// the ensemble: any of them can change the fleet's mode or break a lock.
	ZKOpenACL bool
	// ConnsPerClient caps the connections one client (remote IP address) holds at once; past it
	// a connection is answered 429 too_many_connections and closed (conns.go). 0: 1024.
	ConnsPerClient int
	// EventStreamsPerClient caps one client's share of EventStreams; past it a stream is answered
	// 429 too_many_streams. 0: 16 (at most EventStreams).
	EventStreamsPerClient int
	// KeyLookupRate and KeyLookupBurst are one client's token bucket for look-ups by key (GET
	// /v1/orders?request_id=), a second and at once; CancelRate and CancelBurst, for
	// cancellations; past them 429 rate_limited (ratelimit.go). 0: 100 a second, bursts of 1000.
	KeyLookupRate  float64
	KeyLookupBurst int
	CancelRate     float64
	CancelBurst    int
}

// LoadConfig reads flags, falling back to the environment, then to the defaults. A bad value is
// an error that names the variable; -h prints the usage to out.
func LoadConfig(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	host, _ := os.Hostname() // no host name: ReplicaIDFromHost's fallback
	fs := flag.NewFlagSet("orderd", flag.ContinueOnError)
	fs.SetOutput(out)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	// secret is a flag whose environment variable may hold a secret: -h shows def, never the
	// environment's value, which is applied after parsing unless the flag was given.
	secrets := map[string]string{}
	secret := func(name, variable, def, usage string) *string {
		secrets[name] = variable
		return fs.String(name, def, usage)
	}
	var (
		httpAddr    = fs.String("http-addr", env("HTTP_ADDR", ":8080"), "listen address (HTTP_ADDR)")
		replica     = fs.String("replica-id", env("REPLICA_ID", ReplicaIDFromHost(host)), "this replica's name in orders, logs and lock nodes (REPLICA_ID)")
		zkServers   = fs.String("zk-servers", env("ZK_SERVERS", "127.0.0.1:2181"), "comma-separated ZooKeeper servers (ZK_SERVERS)")
		zkAuth      = secret("zk-auth", "ZK_AUTH", "", "zkstock's ZooKeeper identity, user:password (digest) (ZK_AUTH)")
		zkAuthFile  = fs.String("zk-auth-file", env("ZK_AUTH_FILE", ""), "a file holding user:password, instead of -zk-auth (ZK_AUTH_FILE)")
		zkOpenACL   = fs.String("zk-open-acl", env("ZK_OPEN_ACL", "false"), "true: no identity, every node open to every ZooKeeper client (insecure) (ZK_OPEN_ACL)")
		zkSession   = fs.String("zk-session-timeout", env("ZK_SESSION_TIMEOUT", "10s"), "ZooKeeper session timeout (ZK_SESSION_TIMEOUT)")
		dsn         = secret("mysql-dsn", "MYSQL_DSN", "zkstock@tcp(127.0.0.1:3306)/zkstock?parseTime=true", "database, as the service's user (MYSQL_DSN)")
		dsnFile     = fs.String("mysql-dsn-file", env("MYSQL_DSN_FILE", ""), "file holding MYSQL_DSN (MYSQL_DSN_FILE)")
		migrateDSN  = secret("mysql-migrate-dsn", "MYSQL_MIGRATE_DSN", "", "database as the user that creates and alters the tables; empty: MYSQL_DSN's (MYSQL_MIGRATE_DSN)")
		migrateFile = fs.String("mysql-migrate-dsn-file", env("MYSQL_MIGRATE_DSN_FILE", ""), "file holding MYSQL_MIGRATE_DSN (MYSQL_MIGRATE_DSN_FILE)")
		mysqlNodes  = fs.String("mysql-nodes", env("MYSQL_NODES", ""), "a Galera cluster's nodes, comma-separated host:port, each reached with MYSQL_DSN (and MYSQL_MIGRATE_DSN) at its address, credentials given once (a setting of its own: a DSN's parameters may hold commas); empty: MYSQL_DSN's one server (MYSQL_NODES)")
		lockMode    = fs.String("lock-mode", env("LOCK_MODE", string(ModeZK)), sale.JoinModes()+" (LOCK_MODE)")
		lockTimeout = fs.String("lock-timeout", env("LOCK_TIMEOUT", "5s"), "longest wait for a lock before 503 (LOCK_TIMEOUT)")
		workDelay   = fs.String("work-delay", env("WORK_DELAY", "0"), "simulated work inside the critical section (WORK_DELAY)")
		adminToken  = secret("admin-token", "ADMIN_TOKEN", "", "bearer token for /admin; empty disables it (ADMIN_TOKEN)")
		adminFile   = fs.String("admin-token-file", env("ADMIN_TOKEN_FILE", ""), "file holding ADMIN_TOKEN (ADMIN_TOKEN_FILE)")
		logLevel    = fs.String("log-level", env("LOG_LEVEL", "info"), "debug, info, warn or error (LOG_LEVEL)")
		redisAddr   = fs.String("redis-addr", env("REDIS_ADDR", "127.0.0.1:6379"), "Redis for the redis lock modes (REDIS_ADDR)")
		redisUser   = fs.String("redis-username", env("REDIS_USERNAME", ""), "Redis ACL user; empty: the default user (REDIS_USERNAME)")
		redisPass   = secret("redis-password", "REDIS_PASSWORD", "", "Redis password (REDIS_PASSWORD)")
		redisPFile  = fs.String("redis-password-file", env("REDIS_PASSWORD_FILE", ""), "file holding REDIS_PASSWORD (REDIS_PASSWORD_FILE)")
		streams     = fs.String("event-streams", env("EVENT_STREAMS", "64"), "most live-page streams open at once (EVENT_STREAMS)")
		clientStrms = fs.String("event-streams-per-client", env("EVENT_STREAMS_PER_CLIENT", "16"), "most live-page streams one client (remote IP) holds at once, of EVENT_STREAMS (EVENT_STREAMS_PER_CLIENT)")
		lookupRate  = fs.String("key-lookup-rate", env("KEY_LOOKUP_RATE", "100"), "look-ups by key (GET /v1/orders?request_id=) one client may make a second, past its burst (KEY_LOOKUP_RATE)")
		lookupBurst = fs.String("key-lookup-burst", env("KEY_LOOKUP_BURST", "1000"), "look-ups by key one client may make at once (KEY_LOOKUP_BURST)")
		cancelRate  = fs.String("cancel-rate", env("CANCEL_RATE", "100"), "cancellations one client may send a second, past its burst (CANCEL_RATE)")
		cancelBurst = fs.String("cancel-burst", env("CANCEL_BURST", "1000"), "cancellations one client may send at once (CANCEL_BURST)")
		clientConns = fs.String("conns-per-client", env("CONNS_PER_CLIENT", "1024"), "most connections one client (remote IP) holds at once; behind a proxy or NAT, every client is its address (CONNS_PER_CLIENT)")
		redisTTL    = fs.String("redis-lock-ttl", env("REDIS_LOCK_TTL", "10s"), "Redis lock expiry, extended every third of it while held (REDIS_LOCK_TTL)")
		pprofAddr   = fs.String("pprof-addr", env("PPROF_ADDR", ""), "loopback address for Go's pprof handlers; empty: off (PPROF_ADDR)")
		fleetName   = fs.String("fleet", env("FLEET", "default"), "the fleet whose lock mode this replica runs, kept in ZooKeeper (FLEET)")
		switchLimit = fs.String("switch-timeout", env("SWITCH_TIMEOUT", "0"), "longest wait of a lock-mode switch for the fleet; 0: derived from the other bounds (SWITCH_TIMEOUT)")
		queueBudget = fs.String("queue-budget", env("QUEUE_BUDGET", "0"), "longest foreseen lock wait a purchase is admitted to, else 503 sku_busy; 0: half the lock timeout (QUEUE_BUDGET)")
	)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, variable := range secrets {
		if v := getenv(variable); v != "" && !given[name] {
			if err := fs.Set(name, v); err != nil {
				return Config{}, fmt.Errorf("%s: %w", variable, err)
			}
		}
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var err error
	cfg := Config{HTTPAddr: *httpAddr, ReplicaID: *replica, RedisAddr: *redisAddr, RedisUsername: *redisUser, PprofAddr: *pprofAddr,
		Fleet: *fleetName}
	// A secret's file wins over the default, so the flag's default (a DSN) counts as unset then.
	if *dsnFile != "" && !isSet(fs, getenv, "mysql-dsn", "MYSQL_DSN") {
		*dsn = ""
	}
	for _, s := range []struct {
		name, value, file string
		dst               *string
	}{
		{"MYSQL_DSN", *dsn, *dsnFile, &cfg.MySQLDSN},
		{"MYSQL_MIGRATE_DSN", *migrateDSN, *migrateFile, &cfg.MySQLMigrateDSN},
		{"ADMIN_TOKEN", *adminToken, *adminFile, &cfg.AdminToken},
		{"REDIS_PASSWORD", *redisPass, *redisPFile, &cfg.RedisPassword},
	} {
		v, err := secretSetting(s.name, s.value, s.file)
		if err != nil {
			return Config{}, err
		}
		*s.dst = v
	}
	if cfg.MySQLNodes, err = parseNodes(*mysqlNodes); err != nil {
		return Config{}, fmt.Errorf("MYSQL_NODES: %w", err)
	}
	for _, d := range []struct{ name, dsn string }{{"MYSQL_DSN", cfg.MySQLDSN}, {"MYSQL_MIGRATE_DSN", cfg.MySQLMigrateDSN}} {
		if d.dsn == "" || len(cfg.MySQLNodes) == 0 {
			continue
		}
		if _, err := NodeDSNs(d.dsn, cfg.MySQLNodes); err != nil {
			return Config{}, fmt.Errorf("MYSQL_NODES with %s: %w", d.name, err)
		}
	}
	if err := CheckPprofAddr(cfg.PprofAddr); err != nil {
		return Config{}, fmt.Errorf("PPROF_ADDR: %w", err)
	}
	if n, err := strconv.Atoi(*streams); err != nil || n < 1 || n > 10000 {
		return Config{}, fmt.Errorf("EVENT_STREAMS: %q is not a whole number from 1 to 10000", *streams)
	} else {
		cfg.EventStreams = n
	}
	if n, err := strconv.Atoi(*clientStrms); err != nil || n < 1 || n > cfg.EventStreams && isSet(fs, getenv, "event-streams-per-client", "EVENT_STREAMS_PER_CLIENT") {
		return Config{}, fmt.Errorf("EVENT_STREAMS_PER_CLIENT: %q is not a whole number from 1 to EVENT_STREAMS (%d)", *clientStrms, cfg.EventStreams)
	} else {
		cfg.EventStreamsPerClient = min(n, cfg.EventStreams) // the default, 16, of fewer streams: all of them
	}
	for _, l := range []struct {
		name, rate, burst string
		dstRate           *float64
		dstBurst          *int
	}{
		{"KEY_LOOKUP", *lookupRate, *lookupBurst, &cfg.KeyLookupRate, &cfg.KeyLookupBurst},
		{"CANCEL", *cancelRate, *cancelBurst, &cfg.CancelRate, &cfg.CancelBurst},
	} {
		r, err := strconv.ParseFloat(l.rate, 64)
		if err != nil || !(r >= 0.001 && r <= 1e6) {
			return Config{}, fmt.Errorf("%s_RATE: %q is not a number from 0.001 to 1000000 (a second)", l.name, l.rate)
		}
		b, err := strconv.Atoi(l.burst)
		if err != nil || b < 1 || b > 1_000_000 {
			return Config{}, fmt.Errorf("%s_BURST: %q is not a whole number from 1 to 1000000", l.name, l.burst)
		}
		*l.dstRate, *l.dstBurst = r, b
	}
	if n, err := strconv.Atoi(*clientConns); err != nil || n < 1 || n > 1_000_000 {
		return Config{}, fmt.Errorf("CONNS_PER_CLIENT: %q is not a whole number from 1 to 1000000", *clientConns)
	} else {
		cfg.ConnsPerClient = n
	}
	if cfg.LockMode, err = ParseLockMode(*lockMode); err != nil {
		return Config{}, fmt.Errorf("LOCK_MODE: %w", err)
	}
	for _, d := range []struct {
		name string
		val  string
		dst  *time.Duration
		min  time.Duration
	}{
		{"ZK_SESSION_TIMEOUT", *zkSession, &cfg.ZKSessionTimeout, time.Second},
		{"LOCK_TIMEOUT", *lockTimeout, &cfg.LockTimeout, time.Millisecond},
		{"WORK_DELAY", *workDelay, &cfg.WorkDelay, 0},
		{"REDIS_LOCK_TTL", *redisTTL, &cfg.RedisLockTTL, 30 * time.Millisecond},
		{"SWITCH_TIMEOUT", *switchLimit, &cfg.SwitchTimeout, 0},
		{"QUEUE_BUDGET", *queueBudget, &cfg.QueueBudget, 0},
	} {
		v, err := time.ParseDuration(d.val)
		if err != nil || v < d.min {
			return Config{}, fmt.Errorf("%s: %q is not a duration of at least %v", d.name, d.val, d.min)
		}
		*d.dst = v
	}
	// The work runs inside the transaction, whose connection the server ends after
	// inventory.CommitBound's idle time (so that a transaction stranded behind a vanished client
	// cannot hold its row locks for hours): the work must end well before.
	if maxWork := 8 * time.Second; cfg.WorkDelay > maxWork {
		return Config{}, fmt.Errorf("WORK_DELAY: %v is longer than %v: the work runs inside a database transaction, which the database ends after 10 s of silence", cfg.WorkDelay, maxWork)
	}
	for _, s := range strings.Split(*zkServers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.ZKServers = append(cfg.ZKServers, s)
		}
	}
	if len(cfg.ZKServers) == 0 {
		return Config{}, fmt.Errorf("ZK_SERVERS: no servers given")
	}
	if cfg.ZKOpenACL, err = strconv.ParseBool(*zkOpenACL); err != nil {
		return Config{}, fmt.Errorf("ZK_OPEN_ACL: %q is not true or false", *zkOpenACL)
	}
	if cfg.ZKAuth, err = LoadZKAuth(*zkAuth, *zkAuthFile); err != nil {
		return Config{}, err
	}
	if err := checkZKAuth(cfg.ZKAuth, cfg.ZKOpenACL); err != nil {
		return Config{}, err
	}
	if !skuPattern.MatchString(cfg.Fleet) {
		return Config{}, fmt.Errorf("FLEET: %q must match %s", cfg.Fleet, skuPattern)
	}
	if !skuPattern.MatchString(cfg.ReplicaID) {
		return Config{}, fmt.Errorf("REPLICA_ID: %q must match %s", cfg.ReplicaID, skuPattern)
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return Config{}, fmt.Errorf("LOG_LEVEL: %w", err)
	}
	return cfg, nil
}

// parseNodes reads MYSQL_NODES: host:port entries, separated by commas, none empty, none twice.
// Empty is no list (one server).
func parseNodes(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var nodes []string
	seen := map[string]bool{}
	for i, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, fmt.Errorf("entry %d of %q is empty", i+1, list)
		}
		host, port, err := net.SplitHostPort(n)
		if err != nil {
			return nil, fmt.Errorf("entry %d, %q, is not host:port: %w", i+1, n, err)
		}
		if host == "" || port == "" {
			return nil, fmt.Errorf("entry %d, %q, needs a host and a port", i+1, n)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("entry %d, %q: the port must be a number from 1 to 65535", i+1, n)
		}
		if seen[n] {
			return nil, fmt.Errorf("entry %d, %q, is listed twice", i+1, n)
		}
		seen[n] = true
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// NodeDSNs is dsn at each of nodes' addresses, in their order: the user, the password, the
// database and the parameters are dsn's, given once. dsn must reach its server over TCP.
func NodeDSNs(dsn string, nodes []string) ([]string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse the DSN: %w", err)
	}
	if cfg.Net != "tcp" {
		return nil, fmt.Errorf("the DSN reaches its server over %q: only a tcp(...) address can be replaced by a node's", cfg.Net)
	}
	out := make([]string, len(nodes))
	for i, n := range nodes {
		c := cfg.Clone()
		c.Addr = n
		out[i] = c.FormatDSN()
	}
	return out, nil
}

// isSet reports whether a setting was given, by its flag or its variable, rather than defaulted.
func isSet(fs *flag.FlagSet, getenv func(string) string, flagName, envName string) bool {
	if getenv(envName) != "" {
		return true
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == flagName })
	return set
}

// CheckPprofAddr accepts an address for the pprof handlers (PPROF_ADDR): empty (off), a loopback
// host (127.0.0.1:6060, [::1]:6060, localhost:6060), or a host named explicitly. It refuses an
// address without a host or with a wildcard one (":6060", "0.0.0.0:6060", "[::]:6060"): the
// handlers show the process's memory and stacks and cost CPU on demand, so they listen on every
// interface only when the operator names one, never by leaving the host out.
func CheckPprofAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if port == "" {
		return fmt.Errorf("%q has no port", addr)
	}
	if host == "" {
		return fmt.Errorf("%q listens on every interface: name the host (127.0.0.1:%s for this machine only)", addr, port)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%q listens on every interface: name a loopback host (127.0.0.1:%s) or one interface's address", addr, port)
	}
	return nil
}

// ReplicaIDFromHost is REPLICA_ID's default: the host name made a valid replica id, every
// character a replica id may not hold (a dot of ip-10-0-0-1.ec2.internal, say) turned into '-',
// cut to its longest length; "orderd" when the host name is empty. What it returns always passes
// the check LoadConfig makes of a replica id. Two hosts whose names differ only in such
// characters get the same id: set REPLICA_ID when that can happen.
func ReplicaIDFromHost(host string) string {
	id := notNameChars.ReplaceAllLiteralString(host, "-")
	if len(id) > maxNameLen {
		id = id[:maxNameLen]
	}
	if id == "" {
		return "orderd"
	}
	return id
}
