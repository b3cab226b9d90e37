package dlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
	bgCtx     context.Context
	bgCancel  context.CancelFunc

	mu         sync.Mutex
	gen        *generation   // the session leases are trusted under; nil before the first session
	hasSession bool          // connected with a live session right now
	usable     bool          // hasSession, and go-zookeeper has set its watches again
	sessionUp  chan struct{} // closed while usable; replaced when the connection drops
	epoch      int           // counts connections made and lost, so a late opening is ignored
	downTimer  *time.Timer   // ends gen if the connection stays down too long
	closed     bool
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
	c := &Client{
		cfg:       cfg,
		log:       cfg.logger,
		connReady: make(chan struct{}),
		closedCh:  make(chan struct{}),
		sessionUp: make(chan struct{}),
	}
	c.bgCtx, c.bgCancel = context.WithCancel(context.Background())
	conn, _, err := zk.Connect(servers, cfg.sessionTimeout,
		zk.WithEventCallback(c.onEvent),
		zk.WithLogger(zkLogger{c.log}),
		zk.WithLogInfo(false),
		zk.WithDialer(cfg.dialer))
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
	if _, err := c.session(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("dlock: connect to %v: %w", servers, err)
	}
	return c, nil
}

// Stats returns the client's counters since Connect.
func (c *Client) Stats() Stats { return c.stats.snapshot() }

// SessionID is the current ZooKeeper session's id (0 while there is none).
func (c *Client) SessionID() int64 { return c.conn.SessionID() }

// Connected reports whether the client has a live session right now.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hasSession && !c.closed
}

// Close ends the session. ZooKeeper deletes all of the session's lock nodes with it at once, so
// the next waiters go ahead without waiting for the session timeout. Leases close their Lost
// channel and waiters return ErrClosed. Close is safe to call twice and returns within about a
// second even when ZooKeeper is unreachable (the nodes then vanish when the session expires).
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		if c.downTimer != nil {
			c.downTimer.Stop()
		}
		if c.gen != nil {
			c.gen.end(fmt.Errorf("%w: %w", ErrLost, ErrClosed))
		}
		close(c.closedCh)
		c.mu.Unlock()

		done := make(chan struct{})
		go func() {
			c.conn.Close() // sends closeSession; go-zookeeper waits at most a second for the reply
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
	if c.closed {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		f()
	}()
}
