// Package ordertest starts order-service replicas in the test process, each with its own
// ZooKeeper session and database pool, as separate processes would have.
package ordertest

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/order"
)

// AdminToken is the replicas' admin token unless Options says otherwise.
const AdminToken = "test-admin"

// ZKAuth is the replicas' ZooKeeper identity: the tests' (testenv.ZKAuth).
func ZKAuth() order.ZKAuth {
	user, password := testenv.ZKAuth()
	return order.ZKAuth{User: user, Password: password}
}

// Replica is one running order service.
type Replica struct {
	Name  string
	Srv   *order.Server
	URL   string
	Locks *dlock.Client
	Store *inventory.Store // nil on a Galera cluster (Options.Nodes): see Cluster
	// Cluster is the replica's own view of the Galera cluster (Options.Nodes); nil on one server.
	Cluster *inventory.Cluster
	// Moves counts the moves of the replica's writer on the cluster (and returns to an earlier
	// node among them); nil on one server.
	Moves *atomic.Int64
	DSN   string // the database as the replica was given it (on a cluster, node 1's)
	Fleet string
}

// Options shape the replicas; zero values mean the test servers and sensible defaults.
type Options struct {
	Mode        order.LockMode // default zk
	WorkDelay   time.Duration
	LockTimeout time.Duration // default 30s
	ZKServers   []string      // default the test ZooKeeper
	AdminToken  *string       // default AdminToken
	DSN         string        // default a fresh database
	// Nodes, when set, are a database on each node of a Galera cluster, as its owner, in node
	// order (testenv.GaleraDatabase): each replica opens the cluster (inventory.OpenCluster), as
	// orderd does with MYSQL_NODES, as the service's user. DSN is then ignored.
	Nodes []string
	// ProbeInterval is each replica's cluster's check of its writer (Nodes; default the cluster's).
	ProbeInterval time.Duration
	RedisAddr     string // default $REDIS_ADDR
	NoRedis       bool   // the replicas have no REDIS_ADDR (they cannot run the redis modes)
	// Wrap, if set, wraps each replica's handler (to make a replica misbehave on purpose).
	Wrap func(http.Handler) http.Handler
	// EventStreams caps the live page's streams per replica (default 64).
	EventStreams int
	// EventStreamsPerClient caps one client's (remote IP's) share of them (default 16).
	EventStreamsPerClient int
	// KeyLookupRate, KeyLookupBurst, CancelRate and CancelBurst are one client's limits on
	// look-ups by key and on cancellations (default order's: 100 a second, bursts of 1000).
	KeyLookupRate, CancelRate   float64
	KeyLookupBurst, CancelBurst int
	// FirstNumber numbers the replicas' names from it, order<FirstNumber>, … (default 1): replicas
	// started by separate calls on one database must not share a name, which is their identity
	// in the fleet.
	FirstNumber int
	// Fleet names the replicas' fleet (default: the database's name, so that replicas started by
	// separate calls on one database are one fleet, and every test has a fleet of its own).
	Fleet string
	// NoJoinWait: Start does not wait for the replicas to join their fleet.
	NoJoinWait bool
	// RedisLockTTL is the Redis locks' expiry (default 3 s).
	RedisLockTTL time.Duration
	// QueueBudget is the longest foreseen lock wait a purchase is admitted to (default: half the
	// lock timeout).
	QueueBudget time.Duration
}

func logger() *slog.Logger {
	if os.Getenv("ORDER_TEST_LOG") != "" {
		return slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// Start runs n replicas until the test ends.
func Start(t testing.TB, n int, o Options) []*Replica {
	t.Helper()
	if o.Mode == "" {
		o.Mode = order.ModeZK
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = 30 * time.Second
	}
	if o.ZKServers == nil {
		o.ZKServers = testenv.ZKServers(t)
	}
	if len(o.Nodes) > 0 {
		o.DSN = o.Nodes[0]
	}
	if o.DSN == "" {
		o.DSN = testenv.MySQLDatabase(t)
	}
	if o.Fleet == "" {
		cfg, err := mysql.ParseDSN(o.DSN)
		if err != nil {
			t.Fatal(err)
		}
		o.Fleet = cfg.DBName
	}
	testenv.DeleteZKTreeAtCleanup(t, o.ZKServers, order.FleetRoot+"/"+o.Fleet)
	token := AdminToken
	if o.AdminToken != nil {
		token = *o.AdminToken
	}
	ctx := context.Background()
	user, password := testenv.ZKAuth()
	var serviceDSN string
	var nodeDSNs []string // the service's user at each node, as orderd derives them from MYSQL_NODES
	if len(o.Nodes) > 0 {
		serviceDSN = testenv.AsUser(t, o.DSN, testenv.GaleraServiceDSNs(t)[0])
		var addrs []string
		for _, n := range o.Nodes {
			c, err := mysql.ParseDSN(n)
			if err != nil {
				t.Fatal(err)
			}
			addrs = append(addrs, c.Addr)
		}
		var err error
		if nodeDSNs, err = order.NodeDSNs(serviceDSN, addrs); err != nil {
			t.Fatal(err)
		}
	} else {
		serviceDSN = testenv.ServiceDSN(t, o.DSN)
	}
	redisUser, redisPassword := testenv.RedisUser()
	var out []*Replica
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("order%d", i-1+cmp.Or(o.FirstNumber, 1))
		// Migrated as the database's owner, served as the service's user, as orderd runs with
		// MYSQL_MIGRATE_DSN and MYSQL_DSN.
		owner, err := inventory.Open(ctx, o.DSN, inventory.PoolOptions{MaxOpen: 1})
		if err != nil {
			t.Fatal(err)
		}
		err = owner.Migrate(ctx)
		_ = owner.Close()
		if err != nil {
			t.Fatal(err)
		}
		var src inventory.Source
		var store *inventory.Store
		var cluster *inventory.Cluster
		var moves *atomic.Int64
		if nodeDSNs != nil {
			moves = new(atomic.Int64)
			cluster, err = inventory.OpenCluster(ctx, nodeDSNs, inventory.PoolOptions{}, inventory.ClusterOptions{ProbeInterval: o.ProbeInterval,
				OnMove: func(from, to int) {
					moves.Add(1)
					t.Logf("%s: the writer moved from node %d to node %d", name, from+1, to+1)
				}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cluster.Close() })
			src = cluster
		} else {
			store, err = inventory.Open(ctx, serviceDSN, inventory.PoolOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			src = store
		}
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		locks, err := dlock.Connect(cctx, o.ZKServers, dlock.WithDigest(user, password), dlock.WithOwner(name), dlock.WithSessionTimeout(10*time.Second))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = locks.Close() })
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err = order.SecureZK(sctx, locks, o.Fleet, logger())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		redisAddr := cmp.Or(o.RedisAddr, os.Getenv("REDIS_ADDR"))
		if o.NoRedis {
			redisAddr = ""
		}
		cfg := order.Config{ReplicaID: name, LockMode: o.Mode, LockTimeout: o.LockTimeout, WorkDelay: o.WorkDelay, AdminToken: token,
			ZKServers: o.ZKServers, ZKSessionTimeout: 10 * time.Second, ZKAuth: ZKAuth(), Fleet: o.Fleet, RedisAddr: redisAddr, RedisUsername: redisUser, RedisPassword: redisPassword, RedisLockTTL: cmp.Or(o.RedisLockTTL, 3*time.Second), EventStreams: o.EventStreams,
			QueueBudget: o.QueueBudget, EventStreamsPerClient: o.EventStreamsPerClient,
			KeyLookupRate: o.KeyLookupRate, KeyLookupBurst: o.KeyLookupBurst, CancelRate: o.CancelRate, CancelBurst: o.CancelBurst}
		srv, err := order.New(cfg, src, locks, logger())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		if !o.NoJoinWait {
			jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := srv.Joined(jctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
		var h http.Handler = srv.Handler()
		if o.Wrap != nil {
			h = o.Wrap(h)
		}
		hs := httptest.NewServer(h)
		t.Cleanup(hs.Close)
		t.Cleanup(srv.EndStreams) // before hs.Close, which waits for every request, streams too
		out = append(out, &Replica{Name: name, Srv: srv, URL: hs.URL, Locks: locks, Store: store, Cluster: cluster, Moves: moves, DSN: o.DSN, Fleet: o.Fleet})
	}
	return out
}
