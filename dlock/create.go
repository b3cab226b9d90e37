package dlock

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
	"github.com/zkstock/zkstock/dlock/internal/protected"
)

// ownNode is the lock node one Lock call created and waits with.
type ownNode struct {
	dir   string
	path  string
	node  nodename.Node
	owner int64 // session that created it
	token int64 // the fencing token, set by the first read of the queue

	// behind is the queue read sent right behind the create, before its reply (nil when none
	// was): waitTurn's first look at the queue, if it shows this node.
	behind <-chan queueRead
}

// queueRead is one read of a lock path's children, with the path's stat.
type queueRead struct {
	kids []string
	st   *zk.Stat
	err  error
}

// cleanupTimeout bounds how long a failing call waits to delete its node before it hands the
// deletion to the background (with the connection down, the node vanishes with the session).
const cleanupTimeout = time.Second

// createNode adds this attempt's EPHEMERAL_SEQUENTIAL node to the queue at dir.
func (c *Client) createNode(ctx context.Context, dir string, k nodename.Kind) (*ownNode, error) {
	base, err := c.cfg.naming.layout().Base(k)
	if err != nil {
		return nil, err
	}
	for {
		if _, err := c.session(ctx); err != nil {
			return nil, err
		}
		name, owner, behind, err := c.createAbandonable(ctx, dir, base)
		switch {
		case err == nil:
		case errors.Is(err, zk.ErrNoNode):
			if err := c.ensureParents(ctx, dir); err != nil {
				return nil, err
			}
			continue
		case isConnectionError(err):
			// The create may have been applied with its reply lost (ZOOKEEPER-1262): look for it
			// by its protected name before trying again, or it would block the queue until the
			// session ends.
			name, owner, err = c.findProtected(ctx, dir, base)
			if err != nil {
				// Gave up looking (the context ended while the session was away): the node may
				// still be there, in a session that comes back, ahead of every later waiter.
				c.removeProtectedLater(dir, base)
				return nil, err
			}
			if name == "" {
				continue
			}
		default:
			return nil, fmt.Errorf("create lock node: %w", err)
		}
		node, ok := nodename.Parse(path.Base(name))
		if !ok {
			c.discard(ctx, name, owner)
			return nil, fmt.Errorf("dlock: created node %q has an unexpected name", name)
		}
		return &ownNode{dir: dir, path: name, node: node, owner: owner, behind: behind}, nil
	}
}

// createAbandonable creates the node but stops waiting when ctx ends. A create that is applied
// after its caller gave up is found and deleted in the background.
//
// It also reads the queue in the same round trip: once the create is on the wire, the children
// read goes out right behind it (readBehind), and ZooKeeper, which answers a session's requests in
// order, answers it after the create, with the new node in it. behind delivers that read (or
// errNotBehind when it could not be sent so); waitTurn trusts it only if it shows the node.
func (c *Client) createAbandonable(ctx context.Context, dir, base string) (name string, owner int64, behind <-chan queueRead, err error) {
	type result struct {
		name  string
		owner int64
		err   error
	}
	p := dir + "/" + base
	sent := c.expectCreate(p)
	ch := make(chan result, 1)
	created := make(chan struct{})
	read := make(chan queueRead, 1)
	c.stats.creates.Add(1)
	go func() {
		name, err := c.conn.Create(p, []byte(c.cfg.owner), zk.FlagEphemeralSequential, c.cfg.acl)
		close(created)
		c.forgetCreate(p, sent)
		ch <- result{name, c.conn.SessionID(), err}
	}()
	go c.readBehind(dir, sent, created, read)
	select {
	case r := <-ch:
		return r.name, r.owner, read, r.err
	case <-ctx.Done():
	case <-c.closedCh:
		return "", 0, nil, ErrClosed
	}
	c.background(func() {
		r := <-ch
		switch {
		case r.err == nil:
			c.removeLater(r.name, r.owner)
		case isConnectionError(r.err):
			c.removeProtectedLater(dir, base)
		}
	})
	return "", 0, nil, ctx.Err()
}

// errNotBehind: the queue read was not sent behind the create (see readBehind).
var errNotBehind = errors.New("queue read not sent behind the create")

// readBehind reads the queue at dir as soon as the create is on the wire (sent closes), so that
// both go out back to back and come back together: one round trip where the create, then the
// read, took two. It gives up when the create is answered first (created closes), since the read
// would then cost its round trip anyway and waitTurn makes it, or when the session is not open
// (after a reconnection go-zookeeper sets its watches again, and requests wait for that).
//
// Nothing here has to be sure that the read went out after the create, on the same connection,
// to a server that applied it: waitTurn uses the answer only if it shows the created node, and an
// answer that shows the node is a view of the queue taken after the create (see waitTurn).
func (c *Client) readBehind(dir string, sent, created <-chan struct{}, out chan<- queueRead) {
	select {
	case <-sent:
	case <-created:
		out <- queueRead{err: errNotBehind}
		return
	}
	select {
	case <-created:
		out <- queueRead{err: errNotBehind}
		return
	default:
	}
	c.mu.Lock()
	open := c.state == stateOpen
	c.mu.Unlock()
	if !open {
		out <- queueRead{err: errNotBehind}
		return
	}
	c.stats.children.Add(1)
	c.stats.pipelined.Add(1)
	kids, st, err := c.conn.Children(dir)
	out <- queueRead{kids, st, err}
}

// expectCreate registers a create about to be queued; the channel closes when heardConn sees it
// go out.
func (c *Client) expectCreate(path string) chan struct{} {
	sent := make(chan struct{})
	c.creatingMu.Lock()
	defer c.creatingMu.Unlock()
	if c.creating == nil {
		c.creating = map[string]chan struct{}{}
	}
	c.creating[path] = sent
	return sent
}

// forgetCreate drops a create's registration once it is answered (or failed unsent).
func (c *Client) forgetCreate(path string, sent chan struct{}) {
	c.creatingMu.Lock()
	defer c.creatingMu.Unlock()
	if c.creating[path] == sent {
		delete(c.creating, path)
	}
}

// createSent is heardConn's report that a create for path went out.
func (c *Client) createSent(path string) {
	c.creatingMu.Lock()
	defer c.creatingMu.Unlock()
	if sent, ok := c.creating[path]; ok {
		close(sent)
		delete(c.creating, path)
	}
}

// removeProtectedLater finds an abandoned attempt's node by its protected name once the session
// is back, and deletes it. Its create may have been applied with the reply lost; if the session
// ended meanwhile, the node went with it and there is nothing to find.
func (c *Client) removeProtectedLater(dir, base string) {
	c.keepTrying("looking for an abandoned lock node", func(ctx context.Context) error {
		name, owner, err := c.findProtected(ctx, dir, base)
		if err == nil && name != "" {
			c.removeLater(name, owner)
		}
		return err
	}, "dir", dir)
}

// findProtected looks for this attempt's node by its protected name (protected.Find), through
// this client's retrying requests.
func (c *Client) findProtected(ctx context.Context, dir, base string) (string, int64, error) {
	return protected.Find(ctx, protected.Requests{
		Sync: func(ctx context.Context, p string) error {
			_, err := retry(ctx, c, func() (string, error) { return c.conn.Sync(p) })
			return err
		},
		Children: func(ctx context.Context, p string) ([]string, error) {
			kids, _, err := c.children(ctx, p)
			return kids, err
		},
		Exists:  c.exists,
		Session: c.conn.SessionID,
	}, dir, base, func(p string, owner, sid int64) {
		c.log.Info("ignoring lock node of an earlier session", "node", p,
			"owner", fmt.Sprintf("%#x", owner), "session", fmt.Sprintf("%#x", sid))
	})
}

// ensureParents creates the lock path as container nodes, which ZooKeeper deletes once they
// are empty again, so that idle SKUs leave nothing behind. The price is that a parent may be
// reaped between creating it and creating its child (ErrNoNode one level down): then the walk
// starts again from the top. The server reaps an empty container at most once per check
// interval, so a few rounds always suffice; the bound only stops a loop on a server that
// misbehaves.
func (c *Client) ensureParents(ctx context.Context, dir string) error {
	const rounds = 10
	var err error
	for range rounds {
		if err = c.createPath(ctx, dir); !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return err
}

// createContainer creates the container node p. go-zookeeper's CreateContainer reads its reply
// even when Close ended the request (ErrConnectionClosed) while the reply was being decoded, a
// data race its other requests guard against; so Close waits for the container creates in flight
// before it closes the connection (Close), and none starts once the client is closing.
func (c *Client) createContainer(p string) (string, error) {
	c.mu.Lock()
	if c.state == stateClosed {
		c.mu.Unlock()
		return "", ErrClosed
	}
	c.containerCreates.Add(1)
	c.mu.Unlock()
	defer c.containerCreates.Done()
	return c.conn.CreateContainer(p, nil, zk.FlagContainer, c.cfg.acl)
}

// createPath makes each missing node on the way to dir, top down.
func (c *Client) createPath(ctx context.Context, dir string) error {
	p := ""
	for _, part := range strings.Split(strings.TrimPrefix(dir, "/"), "/") {
		p += "/" + part
		_, err := retry(ctx, c, func() (string, error) {
			c.stats.creates.Add(1)
			return c.createContainer(p)
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create lock path %s: %w", p, err)
		}
	}
	return nil
}

// removeNow deletes a node of ours. goneBefore reports that it was already gone on the first
// try, which for a holder means someone else deleted it. A node whose session has ended is gone
// with it, so there is nothing to do.
func (c *Client) removeNow(ctx context.Context, p string, owner int64) (goneBefore bool, err error) {
	first := true
	for {
		gen, err := c.session(ctx)
		if err != nil {
			return false, err
		}
		if gen.sessionID != owner {
			return false, nil
		}
		_, err = call(ctx, c, func() (struct{}, error) {
			c.stats.deletes.Add(1)
			return struct{}{}, c.conn.Delete(p, -1)
		})
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, zk.ErrNoNode):
			return first, nil
		case !isConnectionError(err):
			return false, fmt.Errorf("delete %s: %w", p, err)
		}
		first = false
	}
}

// discard deletes the node of a call that is failing, within cleanupTimeout even if the caller's
// context has ended, and otherwise in the background: no failure path leaves a live node.
func (c *Client) discard(ctx context.Context, p string, owner int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := c.removeNow(ctx, p, owner); err != nil && !errors.Is(err, ErrClosed) {
		c.log.Warn("lock node not deleted yet; retrying in the background", "node", p, "err", err)
		c.removeLater(p, owner)
	}
}

// removeLater keeps trying to delete a node until it is gone, its session ends, or the client
// closes (Curator's "guaranteed delete").
func (c *Client) removeLater(p string, owner int64) {
	c.keepTrying("deleting lock node", func(ctx context.Context) error {
		_, err := c.removeNow(ctx, p, owner)
		return err
	}, "node", p)
}

// keepTrying runs op in the background, once a second, until it succeeds or the client closes.
func (c *Client) keepTrying(what string, op func(context.Context) error, logArgs ...any) {
	c.background(func() {
		for {
			err := op(c.bgCtx)
			if err == nil || c.bgCtx.Err() != nil || errors.Is(err, ErrClosed) {
				return
			}
			c.log.Warn(what+" failed; trying again", append(logArgs, "err", err)...)
			select {
			case <-time.After(time.Second):
			case <-c.bgCtx.Done():
				return
			}
		}
	})
}
