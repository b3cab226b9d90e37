package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Cluster is the stock database on a Galera cluster, reached through each of its nodes, one of
// which is the writer at a time. Store hands out the writer's Store: every statement goes to one
// node, so that the service's transactions never fail certification against each other (Galera
// finds conflicts between nodes only at COMMIT, with error 1213), and a row lock taken there (the
// fence claim, FOR UPDATE) orders them as on one server. Each node's sessions read causally
// (settings.go), so the stock a new writer reads includes every commit the cluster acknowledged.
//
// A monitor checks the writer every ProbeInterval, and at once when a caller reports an error
// (Report): when the writer does not answer within ProbeTimeout, refuses (1047, out of the
// primary component), or is not Synced, the cluster moves to the first node, in the DSNs' order,
// that is a Synced member of the primary component. When a node before the writer in that order
// has been ready for ReturnAfter, the writer returns to it. So the replicas of a fleet, each with
// a Cluster of its own on the same DSNs, come to write through the same node: the first one
// ready. Until they do (a move is each replica's own, made at its own moment), two of them may
// write through two nodes; their transactions on one row then conflict at COMMIT, and the later
// one is rolled back (ErrRolledBack), never applied over the other.
//
// A transaction in flight on the old writer ends as on one server: rolled back (an error before
// its COMMIT, or ErrRolledBack), or ErrOutcomeUnknown when its COMMIT went unanswered, which
// only the node it ran on can settle (ServerConn.Addr names it; see StoreAt).
type Cluster struct {
	dsns []string
	pool PoolOptions
	opts ClusterOptions

	mu     sync.Mutex // guards stores and probes
	stores []*Store   // per node, nil until opened
	// probes are each node's pool of one connection for the monitor's checks, apart from its
	// Store's: a check then measures the node, not a pool its purchases have filled (writes
	// block across the cluster while it waits to evict a lost node, and hold every connection).
	probes []*sql.DB

	writer atomic.Pointer[member]
	probe  chan struct{} // a report asks the monitor to check the writer now
	stop   context.CancelFunc
	done   chan struct{}
}

type member struct {
	node  int // index in dsns
	store *Store
	since time.Time
}

// ClusterOptions tune the monitor.
type ClusterOptions struct {
	ProbeInterval time.Duration // between checks of the writer; default 500 ms
	ProbeTimeout  time.Duration // a check, or a node's opening, not answered within it fails; default 1 s
	// ReturnAfter is how long a node before the writer in the DSNs' order must answer its checks
	// as ready, without a miss, before the writer returns to it; default 10 s, negative: never.
	ReturnAfter time.Duration
	// OnMove, if set, is called after each move of the writer, with the nodes' indexes.
	OnMove func(from, to int)
	// Log takes the monitor's warnings (a failed check, a node not ready to take over, a move);
	// default slog.Default().
	Log *slog.Logger
}

// OpenCluster opens the cluster at dsns (one per node, go-sql-driver syntax; each node's Store as
// Open makes it) with the first node, in order, that is ready as the writer, opens the others it
// can reach, and starts the monitor. A node whose settings are unsafe fails it at once (ErrMisconfigured: the nodes of a
// cluster share their configuration, and no move would cure it); it fails too when no node is
// ready, with each node's error.
func OpenCluster(ctx context.Context, dsns []string, pool PoolOptions, opts ClusterOptions) (*Cluster, error) {
	if len(dsns) == 0 {
		return nil, fmt.Errorf("%w: no database node given", ErrMisconfigured)
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = 500 * time.Millisecond
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = time.Second
	}
	if opts.ReturnAfter == 0 {
		opts.ReturnAfter = 10 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	c := &Cluster{dsns: dsns, pool: pool, opts: opts, stores: make([]*Store, len(dsns)), probes: make([]*sql.DB, len(dsns)), probe: make(chan struct{}, 1), done: make(chan struct{})}
	var errs []error
	for i := range dsns {
		s, err := c.ready(ctx, i)
		if errors.Is(err, ErrMisconfigured) {
			_ = c.closeStores()
			return nil, err
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.writer.Store(&member{node: i, store: s, since: time.Now()})
		break
	}
	w := c.writer.Load()
	if w == nil {
		_ = c.closeStores()
		return nil, fmt.Errorf("inventory: no node of the cluster is ready: %w", errors.Join(errs...))
	}
	// The other nodes' pools open now, where they can: a move then needs only a check of the
	// node's state (SHOW STATUS, answered at once), where an Open's first reads, causal, wait for
	// the cluster, seconds when a peer has just failed. One that cannot open now opens at a move.
	for i := w.node + 1; i < len(dsns); i++ {
		if _, err := c.ready(ctx, i); errors.Is(err, ErrMisconfigured) {
			_ = c.closeStores()
			return nil, err
		}
	}
	monitorCtx, stop := context.WithCancel(context.Background())
	c.stop = stop
	go c.monitor(monitorCtx)
	return c, nil
}

// Store is the writer's Store, for one operation or one transaction: a caller takes it anew for
// each, so that the next one goes to the node the cluster moved to.
func (c *Cluster) Store() *Store { return c.writer.Load().store }

// Writer is the index, in the DSNs, of the writer's node.
func (c *Cluster) Writer() int { return c.writer.Load().node }

// StoreAt is the Store of the node whose address (mysql.Config's Addr, as in ServerConn.Addr) is
// addr, if it is open: the one node that can settle a transaction whose COMMIT went unanswered
// there.
func (c *Cluster) StoreAt(addr string) (*Store, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.stores {
		if s != nil && s.addr == addr {
			return s, true
		}
	}
	return nil, false
}

// Report tells the cluster that an operation on the writer failed with err: the monitor checks
// the writer now rather than at its next tick. Errors that say nothing of the node (a refusal
// for stock, a stale token) are ignored.
func (c *Cluster) Report(err error) {
	if err == nil || !nodeSuspect(err) {
		return
	}
	select {
	case c.probe <- struct{}{}:
	default:
	}
}

// nodeSuspect says whether err may come from the node rather than from the operation.
func nodeSuspect(err error) bool {
	for _, business := range []error{ErrUnknownSKU, ErrOutOfStock, ErrStaleToken, ErrKeyReused, ErrUnknownOrder, ErrBatchConflict, ErrMisconfigured} {
		if errors.Is(err, business) {
			return false
		}
	}
	var short *ShortError
	return !errors.As(err, &short)
}

// Close stops the monitor and closes every node's Store.
func (c *Cluster) Close() error {
	c.stop()
	<-c.done
	return c.closeStores()
}

func (c *Cluster) closeStores() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i, s := range c.stores {
		if s != nil {
			errs = append(errs, s.Close())
			c.stores[i] = nil
		}
	}
	for i, p := range c.probes {
		if p != nil {
			errs = append(errs, p.Close())
			c.probes[i] = nil
		}
	}
	return errors.Join(errs...)
}

// probeDB is node i's pool for checks, opened at its first use.
func (c *Cluster) probeDB(i int) (*sql.DB, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.probes[i]; p != nil {
		return p, nil
	}
	cfg, err := mysql.ParseDSN(c.withDialTimeout(c.dsns[i]))
	if err != nil {
		return nil, fmt.Errorf("%w: node %d: %w", ErrMisconfigured, i, err)
	}
	cfg.Params = nil // the DSN's session variables are the Store's sessions', not a check's
	p, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("%w: node %d: %w", ErrMisconfigured, i, err)
	}
	p.SetMaxOpenConns(1)
	p.SetMaxIdleConns(1)
	c.probes[i] = p
	return p, nil
}

func (c *Cluster) monitor(ctx context.Context) {
	defer close(c.done)
	tick := time.NewTicker(c.opts.ProbeInterval)
	defer tick.Stop()
	var back returning
	for {
		ticked := false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			ticked = true
		case <-c.probe:
		}
		w := c.writer.Load()
		err := c.check(ctx, w.node, false)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.opts.Log.Warn("inventory: the writer's node failed its check", "node", w.node, "err", err)
			c.move(ctx, w)
			back = returning{}
			continue
		}
		if ticked && c.opts.ReturnAfter > 0 && w.node > 0 {
			c.returnTo(ctx, w, &back)
		}
	}
}

// returning is a node before the writer that has answered every check as ready since a moment.
type returning struct {
	node  int
	since time.Time // zero: none
}

// returnTo makes the first ready node before w's the writer once it has stayed ready for
// ReturnAfter, as back records across ticks.
func (c *Cluster) returnTo(ctx context.Context, w *member, back *returning) {
	for i := 0; i < w.node; i++ {
		s, err := c.ready(ctx, i)
		if err != nil {
			continue
		}
		if back.since.IsZero() || back.node != i {
			*back = returning{node: i, since: time.Now()}
		}
		if time.Since(back.since) < c.opts.ReturnAfter {
			return
		}
		c.setWriter(w.node, i, s)
		*back = returning{}
		return
	}
	*back = returning{}
}

// setWriter makes node to, whose Store is s, the writer in from's place.
func (c *Cluster) setWriter(from, to int, s *Store) {
	c.writer.Store(&member{node: to, store: s, since: time.Now()})
	c.opts.Log.Warn("inventory: the writer moved", "from", from, "to", to)
	if c.opts.OnMove != nil {
		c.opts.OnMove(from, to)
	}
}

// check asks node i, within ProbeTimeout, whether it is a member of the primary component that
// accepts queries, and Synced too when synced says so: a node taking over must be; the writer may
// stay while it donates an incremental transfer (nodeReady). It asks on a connection of its own
// (probeDB), so that a writer whose purchases wait for the cluster is not taken for a lost one.
func (c *Cluster) check(ctx context.Context, i int, synced bool) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ProbeTimeout)
	defer cancel()
	p, err := c.probeDB(i)
	if err != nil {
		return err
	}
	conn, err := p.Conn(ctx)
	if err != nil {
		return nodeErr(err, true)
	}
	defer conn.Close()
	return nodeErr(nodeReady(ctx, conn, synced), true)
}

// move makes the first ready node, in the DSNs' order, other than w's the writer; with none ready,
// w stays, and the next tick tries again.
func (c *Cluster) move(ctx context.Context, w *member) {
	for i := range c.dsns {
		if i == w.node {
			continue
		}
		s, err := c.ready(ctx, i)
		if err != nil {
			c.opts.Log.Warn("inventory: node not ready to take over", "node", i, "err", err)
			continue
		}
		c.setWriter(w.node, i, s)
		return
	}
}

// ready is node i's Store, opened if it is not yet, when the node is a Synced member of the
// primary component.
func (c *Cluster) ready(ctx context.Context, i int) (*Store, error) {
	c.mu.Lock()
	s := c.stores[i]
	c.mu.Unlock()
	if s == nil {
		octx, cancel := context.WithTimeout(ctx, 3*c.opts.ProbeTimeout) // a handful of round trips
		defer cancel()
		var err error
		if s, err = Open(octx, c.withDialTimeout(c.dsns[i]), c.pool); err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		c.mu.Lock()
		c.stores[i] = s
		c.mu.Unlock()
		return s, nil // Open checked the node's state
	}
	if err := c.check(ctx, i, true); err != nil {
		return nil, fmt.Errorf("node %d: %w", i, err)
	}
	return s, nil
}

// withDialTimeout is dsn with a connect timeout no longer than ProbeTimeout, unless it sets one:
// a node that does not accept a connection must not hold up a move.
func (c *Cluster) withDialTimeout(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.Timeout != 0 {
		return dsn // Open reports the parse error
	}
	cfg.Timeout = c.opts.ProbeTimeout
	return cfg.FormatDSN()
}
