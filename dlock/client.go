package dlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Client owns one ZooKeeper session; every lock of a process shares it.
type Client struct {
	conn  *zk.Conn
	cfg   config
	log   *slog.Logger
	stats counters

	connReady chan struct{} // closed once conn is set, so the event callback may use it
	closedCh  chan struct{}
	closeOnce sync.Once
	bg        sync.WaitGroup // background node removals
	// containerCreates are the container creates in flight (createContainer), counted under mu.
	containerCreates sync.WaitGroup
	bgCtx            context.Context
	bgCancel         context.CancelFunc

	// Liveness, written by the connection (heard.go) without taking mu.
	born               time.Time    // origin of the client's monotonic clock
	provedAt           atomic.Int64 // latest time the leader is proved to have touched the session
	proofSentAt        atomic.Int64 // send time of the latest proof (a sync or a write)
	timeout            atomic.Int64 // negotiated session timeout
	lostWhileConnected atomic.Bool

	// Creates waiting to be sent, by path: a lock sends its queue read once its create is out
	// (readBehind in create.go; heardConn reports the send).
	creatingMu sync.Mutex
	creating   map[string]chan struct{}

	// The session state machine (session.go).
	mu            sync.Mutex
	state         sessionState
	gen           *generation   // the session leases are trusted under; nil before the first
	sessionUp     chan struct{} // closed while the state is open
	resumes       int           // counts reconnections, so that a late grace timer is ignored
	deadlineTimer *time.Timer
	listener      *notifier // nil without WithStateListener
}

// Connect opens a ZooKeeper session and waits until it is established or ctx ends. The client
// reconnects by itself afterwards; locks taken while it is disconnected wait for it.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if len(servers) == 0 {
		return nil, errors.New("dlock: connect: no ZooKeeper servers given")
	}
	if !cfg.naming.layout().Valid() {
		return nil, fmt.Errorf("dlock: connect: unknown naming %v", cfg.naming)
	}
	c := &Client{
		cfg:       cfg,
		log:       cfg.logger,
		connReady: make(chan struct{}),
		closedCh:  make(chan struct{}),
		sessionUp: make(chan struct{}),
		born:      time.Now(),
	}
	c.timeout.Store(int64(cfg.sessionTimeout))
	if cfg.listener != nil {
		c.listener = newNotifier(cfg.listener)
	}
	c.bgCtx, c.bgCancel = context.WithCancel(context.Background())
	dial := func(network, address string, timeout time.Duration) (net.Conn, error) {
		conn, err := cfg.dialer(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return newHeardConn(conn, c), nil
	}
	conn, _, err := zk.Connect(servers, cfg.sessionTimeout,
		zk.WithEventCallback(c.onEvent),
		zk.WithLogger(zkLogger{c.log}),
		zk.WithLogInfo(false),
		zk.WithDialer(dial))
	if err != nil {
		return nil, fmt.Errorf("dlock: connect to %v: %w", servers, err)
	}
	c.conn = conn
	close(c.connReady)
	for _, a := range cfg.auth {
		if err := conn.AddAuth(a.scheme, a.auth); err != nil {
			conn.Close()
			return nil, fmt.Errorf("dlock: connect: add %s auth: %w", a.scheme, err)
		}
	}
	go c.keepProving() // ends with Close, which every return from here on makes sure of
	if _, err := c.session(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("dlock: connect to %v: %w", servers, err)
	}
	return c, nil
}

// ACL is the ACL the client gives the nodes it creates (WithACL, WithDigest): recipes built on
// the client, such as dlock/fleet, give theirs the same.
func (c *Client) ACL() []zk.ACL { return slices.Clone(c.cfg.acl) }

// Stats returns the client's counters since Connect.
func (c *Client) Stats() Stats { return c.stats.snapshot() }

// SessionID is the current ZooKeeper session's id (0 while there is none).
func (c *Client) SessionID() int64 { return c.conn.SessionID() }

// SessionTimeout is the session timeout the server granted, which may be shorter or longer than
// the one asked for (ZooKeeper keeps it between 2 and 20 ticks unless configured otherwise).
func (c *Client) SessionTimeout() time.Duration { return time.Duration(c.timeout.Load()) }

// Connected reports whether the client has a live session right now.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == stateOpen || c.state == stateResuming
}

// Close ends the session. ZooKeeper deletes all of the session's lock nodes with it at once, so
// the next waiters go ahead without waiting for the session timeout. Leases close their Lost
// channel and waiters return ErrClosed. Close is safe to call twice and returns within about a
// second even when ZooKeeper is unreachable (the nodes then vanish when the session expires).
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		if c.deadlineTimer != nil {
			c.deadlineTimer.Stop()
		}
		if c.gen != nil {
			c.gen.end(fmt.Errorf("%w: %w", ErrLost, ErrClosed))
		}
		c.setStateLocked(stateClosed)
		close(c.closedCh)
		c.mu.Unlock()

		done := make(chan struct{})
		go func() {
			// A container create in flight ends with its reply, or with the connection's loss
			// (go-zookeeper's own timeout): both are safe, an end by Close is not (createContainer).
			waitAtMost(&c.containerCreates, time.Second) // within Close's 2 s with conn.Close's own second
			c.conn.Close()                               // sends closeSession; go-zookeeper waits at most a second for the reply
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			c.log.Warn("zookeeper close did not finish in time")
		}
		c.bgCancel()
		c.bg.Wait()
	})
	return nil
}

// zkLogger sends go-zookeeper's printf logging to slog at debug level: it reports every reconnect
// attempt, which is noise at info level.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug(fmt.Sprintf(format, args...), "component", "go-zookeeper")
}

// background runs f on its own goroutine unless the client is closing: Close waits for these, and
// a goroutine started once it waits would race with it. After Close, nothing is left to clean up
// anyway, since ending the session deletes the client's nodes.
func (c *Client) background(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateClosed {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		f()
	}()
}

// waitAtMost waits for wg, at most d.
func waitAtMost(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
