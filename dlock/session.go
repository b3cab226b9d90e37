package dlock

import (
	"context"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// A generation is one stretch of time during which the client's lock nodes can be trusted: it
// ends when the session expires, when the connection has been down for two thirds of the session
// timeout (the server may expire the session any moment after), or when the client closes. Every
// lease belongs to the generation it was acquired in and is lost when that generation ends.
type generation struct {
	sessionID int64
	done      chan struct{}
	err       error // why it ended; written before done is closed
}

func newGeneration(sessionID int64) *generation {
	return &generation{sessionID: sessionID, done: make(chan struct{})}
}

func (g *generation) end(err error) {
	select {
	case <-g.done:
	default:
		g.err = err
		close(g.done)
	}
}

func (g *generation) ended() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// onEvent follows go-zookeeper's session states. It runs on go-zookeeper's event loop, so it
// only updates state and never blocks on the network.
func (c *Client) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	<-c.connReady
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		id := c.conn.SessionID()
		if c.downTimer != nil {
			c.downTimer.Stop()
			c.downTimer = nil
		}
		first := c.gen == nil
		if c.gen == nil || c.gen.sessionID != id || c.gen.ended() {
			if c.gen != nil && !c.gen.ended() {
				c.gen.end(fmt.Errorf("%w: ZooKeeper session %#x expired", ErrLost, c.gen.sessionID))
			}
			c.gen = newGeneration(id)
			c.log.Info("zookeeper session established", "session", fmt.Sprintf("%#x", id))
		}
		if c.hasSession {
			return
		}
		c.hasSession = true
		c.epoch++
		if first {
			c.openLocked() // no watch yet for go-zookeeper to set again
			return
		}
		// go-zookeeper sets the client's watches again right after this event, reading the last
		// zxid it saw without a lock while its receive loop writes it with each reply
		// (go-zookeeper/zk PR #35, samuel/go-zookeeper#260). A request sent at once would race
		// with it, so the waiters go on a moment later.
		epoch := c.epoch
		time.AfterFunc(watchResetGrace, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.hasSession && c.epoch == epoch && !c.closed {
				c.openLocked()
			}
		})
	case zk.StateExpired:
		if c.gen != nil {
			c.gen.end(fmt.Errorf("%w: ZooKeeper session %#x expired", ErrLost, c.gen.sessionID))
			c.log.Warn("zookeeper session expired", "session", fmt.Sprintf("%#x", c.gen.sessionID))
		}
		c.connectionDownLocked()
	case zk.StateDisconnected, zk.StateConnecting, zk.StateConnected:
		// go-zookeeper cycles through these about once a second while the server is unreachable;
		// only the first one after HasSession starts the clock, and only HasSession stops it.
		c.connectionDownLocked()
	}
}

// watchResetGrace is how long after a reconnection requests wait for go-zookeeper to have set
// its watches again; it does so at once, so this is ample and costs nothing next to an outage.
const watchResetGrace = 50 * time.Millisecond

// openLocked lets requests through: session() returns at once until the connection drops.
func (c *Client) openLocked() {
	if !c.usable {
		c.usable = true
		close(c.sessionUp)
	}
}

func (c *Client) connectionDownLocked() {
	if !c.hasSession {
		return
	}
	c.hasSession = false
	c.epoch++
	if c.usable {
		c.usable = false
		c.sessionUp = make(chan struct{})
	}
	if c.gen == nil || c.gen.ended() {
		return
	}
	gen := c.gen
	limit := c.cfg.sessionTimeout * 2 / 3
	c.log.Warn("zookeeper connection lost", "lost_after", limit.String())
	c.downTimer = time.AfterFunc(limit, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.hasSession && c.gen == gen {
			gen.end(fmt.Errorf("%w: ZooKeeper connection down for more than %v", ErrLost, limit))
			c.log.Warn("zookeeper connection down too long: leases lost", "limit", limit.String())
		}
	})
}

// session waits until the client has a live session and returns its generation.
func (c *Client) session(ctx context.Context) (*generation, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if c.usable {
			g := c.gen
			c.mu.Unlock()
			return g, nil
		}
		up := c.sessionUp
		c.mu.Unlock()
		select {
		case <-up:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a ZooKeeper session: %w", ctx.Err())
		case <-c.closedCh:
			return nil, ErrClosed
		}
	}
}
