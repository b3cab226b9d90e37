// Package teaching holds the lock recipes that dlock's fair Mutex is measured against: SpinLock
// (retry creating one fixed node), NodeWatchLock (every waiter watches one fixed node) and
// HerdLock (sequential nodes, every waiter watches the children list). They are correct but
// costly: with n waiters each release wakes about (n+1)/2 of them on average in the watch-based
// ones, against exactly one for dlock.Mutex. They exist for lockbench, the zk-herd lock mode and
// the tutorials, not for production: their Lost rule is the crude one (any disconnection). Their
// fencing tokens follow dlock's rule (see Lease.Token), so a lock path may pass between them and
// dlock.Mutex and a fence still admits each next holder.
package teaching

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/internal/async"
	"github.com/zkstock/zkstock/dlock/internal/nodename"
	"github.com/zkstock/zkstock/dlock/internal/protected"
)

// Client is one ZooKeeper session for the teaching recipes, counting the work they do.
type Client struct {
	conn  *zk.Conn
	owner string
	acl   []zk.ACL
	auth  [][]byte // digest user:password, sent again by go-zookeeper on every reconnect
	stats struct {
		creates, deletes, children, exists, gets, watchEvents, acquisitions atomic.Int64
	}

	mu     sync.Mutex
	up     bool
	down   chan struct{} // closed when the connection drops; a new one per connection
	back   chan struct{} // closed while the client has a session; a new one per disconnection
	closed chan struct{}
	once   sync.Once
	// containerCreates are the container creates in flight, counted under mu while not closed:
	// Close waits for them before it closes the connection (see ensurePath).
	containerCreates sync.WaitGroup
	closing          bool

	// bg is the context of the clean-ups that outlive the calls that started them; Close ends it.
	bg       context.Context
	bgCancel context.CancelFunc
}

// Option configures Connect.
type Option func(*Client)

// WithDigest authenticates the session as user:password (digest) and gives the nodes the client
// creates the ACL dlock.WithDigest gives: only that identity changes them, anyone reads them.
func WithDigest(user, password string) Option {
	return func(c *Client) {
		c.auth = append(c.auth, []byte(user+":"+password))
		c.acl = dlock.DigestACL(user, password)
	}
}

// Connect opens a session and waits until it is established or ctx ends. owner names the client
// in the data of its nodes, as dlock.WithOwner does. Without WithDigest its nodes are open to all.
func Connect(ctx context.Context, servers []string, sessionTimeout time.Duration, owner string, opts ...Option) (*Client, error) {
	c := &Client{owner: owner, acl: zk.WorldACL(zk.PermAll), down: make(chan struct{}), back: make(chan struct{}),
		closed: make(chan struct{})}
	c.bg, c.bgCancel = context.WithCancel(context.Background())
	for _, o := range opts {
		o(c)
	}
	ready := make(chan struct{})
	var readyOnce sync.Once
	conn, _, err := zk.Connect(servers, sessionTimeout, zk.WithLogInfo(false), zk.WithLogger(quiet{}),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type != zk.EventSession {
				return
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			switch {
			case ev.State == zk.StateHasSession && !c.up:
				c.up = true
				close(c.back)
				readyOnce.Do(func() { close(ready) })
			case ev.State != zk.StateHasSession && c.up:
				c.up = false
				close(c.down)
				c.down = make(chan struct{})
				c.back = make(chan struct{})
			}
		}))
	if err != nil {
		c.bgCancel()
		return nil, fmt.Errorf("teaching: connect: %w", err)
	}
	c.conn = conn
	for _, a := range c.auth {
		if err := conn.AddAuth("digest", a); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("teaching: connect: add digest auth: %w", err)
		}
	}
	select {
	case <-ready:
		return c, nil
	case <-ctx.Done():
		_ = c.Close()
		return nil, fmt.Errorf("teaching: connect: %w", ctx.Err())
	}
}

// Close ends the session; its nodes go with it, and the clean-ups still trying stop.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		close(c.closed)
		c.bgCancel()
		done := make(chan struct{})
		go func() { c.containerCreates.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
		}
		c.conn.Close()
	})
	return nil
}

// Stats counts the client's ZooKeeper work since Connect, in dlock's terms.
func (c *Client) Stats() dlock.Stats {
	s := &c.stats
	return dlock.Stats{Creates: s.creates.Load(), Deletes: s.deletes.Load(), ChildrenCalls: s.children.Load(),
		ExistsCalls: s.exists.Load(), GetCalls: s.gets.Load(), WatchEvents: s.watchEvents.Load(),
		Acquisitions: s.acquisitions.Load()}
}

// Locker is what every teaching recipe offers.
type Locker interface {
	Lock(ctx context.Context) (*Lease, error)
}

var (
	_ Locker = (*SpinLock)(nil)
	_ Locker = (*NodeWatchLock)(nil)
	_ Locker = (*HerdLock)(nil)
)

var errClosed = errors.New("teaching: client closed")

// call runs one request and stops waiting for it when ctx ends or the client closes.
func call[T any](ctx context.Context, c *Client, op func() (T, error)) (T, error) {
	return async.Call(ctx, c.closed, errClosed, op)
}

// ensurePath creates the lock path as container nodes, which ZooKeeper removes once empty.
func (c *Client) ensurePath(ctx context.Context, dir string) error {
	p := ""
	for _, part := range strings.Split(strings.TrimPrefix(dir, "/"), "/") {
		p += "/" + part
		_, err := call(ctx, c, func() (string, error) {
			// go-zookeeper's CreateContainer reads its reply even when Close ended the request
			// while the reply was decoded (a data race): Close waits for these first.
			c.mu.Lock()
			if c.closing {
				c.mu.Unlock()
				return "", errClosed
			}
			c.containerCreates.Add(1)
			c.mu.Unlock()
			defer c.containerCreates.Done()
			c.stats.creates.Add(1)
			return c.conn.CreateContainer(p, nil, zk.FlagContainer, c.acl)
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// create makes a node of ours, creating the lock path first if it is missing. A create that ctx
// ended before its answer came still runs, and may be applied later, even after a holder's
// release: the node it made is deleted as soon as its answer says so, or it would hold the lock
// (or block the queue) for nobody until the session ended.
//
// A sequential node's name is protected (nodename's Base: unique to the attempt). When the
// connection drops before the create's reply, ZooKeeper may have applied it: create looks for
// the node by that name once the session is back (protected.Find) and returns it, or creates it
// again if it is not there. When it cannot look (ctx ended, or the look failed), the client
// looks in the background and deletes what it finds. A fixed node's create is tried again.
func (c *Client) create(ctx context.Context, dir, name string, flags int32) (string, error) {
	isProtected := flags&zk.FlagSequence != 0
	for reaped := 0; ; {
		p, err := async.CallUndo(ctx, c.closed, errClosed, func() (string, error) {
			c.stats.creates.Add(1)
			return c.conn.Create(dir+"/"+name, []byte(c.owner), flags, c.acl)
		}, func(p string, err error) {
			switch {
			case err == nil:
				_ = c.remove(context.Background(), p)
			case isProtected && protected.ConnectionError(err):
				c.removeProtectedLater(dir, name)
			}
		})
		switch {
		case isProtected && protected.ConnectionError(err):
			found, err := c.findProtected(ctx, dir, name)
			if err != nil {
				c.removeProtectedLater(dir, name)
				return "", err
			}
			if found != "" {
				return found, nil
			}
			// Not applied: create it again.
		case protected.ConnectionError(err):
			// A fixed name: created again, it answers ErrNodeExists if the lost create was
			// applied, and tryFixed then checks the node's owner.
			if err := c.session(ctx); err != nil {
				return "", err
			}
		case errors.Is(err, zk.ErrNoNode):
			// A container parent may be reaped between creating it and its child.
			if reaped++; reaped == 10 {
				return "", fmt.Errorf("create under %s: the path keeps vanishing", dir)
			}
			if err := c.ensurePath(ctx, dir); err != nil {
				return "", err
			}
		default:
			return p, err
		}
	}
}

// session waits until the client has a session, ctx ends or the client closes.
func (c *Client) session(ctx context.Context) error {
	c.mu.Lock()
	back := c.back
	c.mu.Unlock()
	select {
	case <-back:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return errClosed
	}
}

// retry runs a request that is safe to repeat, again after every connection error, each time
// once the client has a session.
func retry[T any](ctx context.Context, c *Client, op func() (T, error)) (T, error) {
	for {
		if err := c.session(ctx); err != nil {
			var zero T
			return zero, err
		}
		if v, err := call(ctx, c, op); err == nil || !protected.ConnectionError(err) {
			return v, err
		}
	}
}

// findProtected looks for the node created with the protected name base under dir in this
// session: its path, or "" when the create was not applied.
func (c *Client) findProtected(ctx context.Context, dir, base string) (string, error) {
	p, _, err := protected.Find(ctx, protected.Requests{
		Sync: func(ctx context.Context, p string) error {
			_, err := retry(ctx, c, func() (string, error) { return c.conn.Sync(p) })
			return err
		},
		Children: func(ctx context.Context, p string) ([]string, error) {
			return retry(ctx, c, func() ([]string, error) {
				c.stats.children.Add(1)
				kids, _, err := c.conn.Children(p)
				return kids, err
			})
		},
		Exists: func(ctx context.Context, p string) (*zk.Stat, error) {
			return retry(ctx, c, func() (*zk.Stat, error) {
				c.stats.exists.Add(1)
				ok, st, err := c.conn.Exists(p)
				if err == nil && !ok {
					return nil, zk.ErrNoNode
				}
				return st, err
			})
		},
		Session: c.conn.SessionID,
	}, dir, base, func(p string, owner, sid int64) {
		slog.Info("teaching: ignoring a lock node of an earlier session", "node", p,
			"owner", fmt.Sprintf("%#x", owner), "session", fmt.Sprintf("%#x", sid))
	})
	if err != nil {
		return "", fmt.Errorf("teaching: %w", err)
	}
	return p, nil
}

// removeProtectedLater finds an abandoned attempt's node by its protected name once the session
// is back, and deletes it; if the session ended meanwhile, the node went with it.
func (c *Client) removeProtectedLater(dir, base string) {
	c.keepTrying("looking for an abandoned lock node", func(ctx context.Context) error {
		p, err := c.findProtected(ctx, dir, base)
		if err != nil || p == "" {
			return err
		}
		return c.delete(ctx, p)
	}, "dir", dir)
}

// keepTrying runs op in the background, again a second after each failure, until it succeeds or
// the client closes.
func (c *Client) keepTrying(what string, op func(context.Context) error, logArgs ...any) {
	go func() {
		for {
			err := op(c.bg)
			if err == nil || c.bg.Err() != nil {
				return
			}
			slog.Warn("teaching: "+what+" failed; trying again", append(logArgs, "err", err)...)
			select {
			case <-time.After(time.Second):
			case <-c.bg.Done():
				return
			}
		}
	}()
}

// remove deletes a node of ours within a second, even if ctx has ended. A protected node it
// could not delete so, the connection being down, is deleted in the background once the session
// is back (its name is the attempt's alone, so a later delete hits no other holding); a fixed
// node is left to the session.
func (c *Client) remove(ctx context.Context, p string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, err := call(ctx, c, func() (struct{}, error) {
		c.stats.deletes.Add(1)
		return struct{}{}, c.conn.Delete(p, -1)
	})
	switch {
	case err == nil || errors.Is(err, zk.ErrNoNode):
		return nil
	case isProtectedNode(p) && (protected.ConnectionError(err) || errors.Is(err, context.DeadlineExceeded)):
		c.keepTrying("deleting a lock node", func(ctx context.Context) error { return c.delete(ctx, p) }, "node", p)
	}
	return err
}

// delete deletes a protected node of ours, again after connection errors; one that is gone
// (deleted, or with its session) is no error.
func (c *Client) delete(ctx context.Context, p string) error {
	_, err := retry(ctx, c, func() (struct{}, error) {
		c.stats.deletes.Add(1)
		return struct{}{}, c.conn.Delete(p, -1)
	})
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete %s: %w", p, err)
	}
	return nil
}

// isProtectedNode reports whether p is a sequential node: the teaching recipes name every one
// they create with a protected name.
func isProtectedNode(p string) bool {
	_, ok := nodename.Parse(path.Base(p))
	return ok
}

// grant turns a node of ours into a lease: it watches the node, and takes the token from token,
// which the recipe computes by nodename.Token.
func (c *Client) grant(ctx context.Context, p string, token func() (int64, error)) (*Lease, error) {
	c.mu.Lock()
	down := c.down
	up := c.up
	c.mu.Unlock()
	if !up {
		return nil, errors.New("teaching: disconnected")
	}
	ch, err := call(ctx, c, func() (<-chan zk.Event, error) {
		c.stats.exists.Add(1)
		ok, _, ch, err := c.conn.ExistsW(p)
		if err == nil && !ok {
			return nil, zk.ErrNoNode
		}
		return ch, err
	})
	if err != nil {
		return nil, err
	}
	tok, err := token()
	if err != nil {
		return nil, err
	}
	c.stats.acquisitions.Add(1)
	return newLease(c, p, tok, down, ch), nil
}

// grantFixed is grant for the fixed node p under dir, which has no sequence number: its token
// counts the path's child creates as read while the node is held (nodename.FixedCount). The
// path's stat is read beside the node's watch rather than after it, so it adds no round trip.
func (c *Client) grantFixed(ctx context.Context, dir, p string) (*Lease, error) {
	type stat struct {
		st  *zk.Stat
		err error
	}
	dirStat := make(chan stat, 1)
	go func() {
		st, err := call(ctx, c, func() (*zk.Stat, error) {
			c.stats.exists.Add(1)
			ok, st, err := c.conn.Exists(dir)
			if err == nil && !ok {
				return nil, zk.ErrNoNode
			}
			return st, err
		})
		dirStat <- stat{st, err}
	}()
	return c.grant(ctx, p, func() (int64, error) {
		r := <-dirStat
		if r.err != nil {
			return 0, fmt.Errorf("read lock path %s: %w", dir, r.err)
		}
		return nodename.Token(r.st.Czxid, nodename.FixedCount(r.st.Cversion, r.st.NumChildren)), nil
	})
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
