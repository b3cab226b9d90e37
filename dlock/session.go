package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// The session state machine. One client, one machine; every field below mu in Client belongs to
// it, and only the functions in this file change them.
//
//	connecting ──HasSession──▶ open ◀──grace──┐
//	                            │             resuming ◀──HasSession (same session)──┐
//	                            └──conn down──▶ suspended ──────────────────────────┘
//	open, resuming, suspended ──deadline passed──▶ lost  (leases lost; the session may live on)
//	any ──Expired──▶ lost;  lost ──HasSession, or replies again──▶ open/resuming (new generation)
//	any ──Close──▶ closed
//
// Requests flow only in open. Leases are trusted in open, resuming and suspended, and only until
// the deadline: the latest time at which the leader is proved to have touched the session, plus
// the negotiated session timeout, less a margin (see heard.go). go-zookeeper cycles through
// Disconnected, Connecting and Connected about once a second while a server is unreachable; none
// of them moves the deadline, and only HasSession ends a suspension.
type sessionState int

const (
	stateConnecting sessionState = iota // no session yet
	stateOpen                           // session live, requests flow
	stateResuming                       // session back after a disconnection, watches being set again
	stateSuspended                      // connection down or silent; the session may be alive
	stateLost                           // leases lost; waiting for a session to trust
	stateClosed
)

func (s sessionState) String() string {
	return [...]string{"connecting", "open", "resuming", "suspended", "lost", "closed"}[s]
}

// A generation is one stretch of time during which the client's lock nodes can be trusted. Every
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

// watchResetGrace is how long after a reconnection requests wait for go-zookeeper to have set
// its watches again. go-zookeeper does so at once, reading the last zxid it saw without a lock
// while its receive loop writes it with each reply (go-zookeeper/zk PR #35,
// samuel/go-zookeeper#260); a request sent at the same moment would race with it.
const watchResetGrace = 50 * time.Millisecond

// leaseMargin is how much earlier than the server could possibly expire the session the client
// stops trusting its leases: room for the client's own scheduling and for clocks that tick at
// slightly different rates. A tenth of the session timeout.
func leaseMargin(timeout time.Duration) time.Duration { return timeout / 10 }

// now is the client's monotonic clock, the one send times are noted in.
func (c *Client) now() time.Duration { return time.Since(c.born) }

// The Client is the liveness heardConn reports to.
var _ liveness = (*Client)(nil)

// proofGap is G of heard.go: half the servers' tick, the longest the leader waits between two
// pings of a follower, plus T/12 for the ping to reach the follower and its answer to be written,
// which on a working link takes milliseconds.
func (c *Client) proofGap() time.Duration {
	t := time.Duration(c.timeout.Load())
	tick := c.cfg.serverTick
	if tick <= 0 {
		tick = t / 2
	}
	return tick/2 + t/12
}

// proofInterval is how long the client lets pass without a proof before it sends a sync: short
// enough next to T − T/10 − G that a proof missing for a moment (a slow leader, a stall shorter
// than a quarter of the session) does not lose the leases.
func proofInterval(timeout time.Duration) time.Duration { return timeout / 15 }

// proved takes a time at which the leader is proved to have touched the session (see heard.go).
func (c *Client) proved(at time.Duration) {
	for {
		last := c.provedAt.Load()
		if int64(at) <= last || c.provedAt.CompareAndSwap(last, int64(at)) {
			break
		}
	}
	if c.lostWhileConnected.Load() {
		// The deadline passed while go-zookeeper kept its connection (a server that answered too
		// slowly, or one cut off from its leader); the leader is heard again, so the session lives
		// and can be trusted anew, if the proof is recent enough to push the deadline ahead.
		c.mu.Lock()
		if c.state == stateLost && c.conn.State() == zk.StateHasSession && c.deadline() > c.now() {
			c.lostWhileConnected.Store(false)
			c.startGenerationLocked(c.conn.SessionID())
			c.setStateLocked(stateOpen)
		}
		c.mu.Unlock()
	}
}

func (c *Client) proofSent(at time.Duration) {
	for {
		last := c.proofSentAt.Load()
		if int64(at) <= last || c.proofSentAt.CompareAndSwap(last, int64(at)) {
			return
		}
	}
}

// negotiated takes the session timeout a connect response granted (zero if the server refused the
// session).
func (c *Client) negotiated(timeout time.Duration) {
	if timeout > 0 {
		c.timeout.Store(int64(timeout))
	}
}

// deadline is when the current session's leases stop being trusted, on the client's clock.
func (c *Client) deadline() time.Duration {
	t := time.Duration(c.timeout.Load())
	return time.Duration(c.provedAt.Load()) + t - leaseMargin(t)
}

// keepProving sends a sync whenever no proof has gone to the server for proofInterval, so that
// the deadline keeps moving while no lock is taken or released. It sends one at a time: during a
// partition a sync waits until go-zookeeper gives up on the connection, and sends the next at once
// when a late answer comes. It ends when the client closes.
func (c *Client) keepProving() {
	for {
		every := proofInterval(time.Duration(c.timeout.Load()))
		wait := every - (c.now() - time.Duration(c.proofSentAt.Load()))
		switch {
		case wait > 0: // a proof went out lately (a lock taken or released, or the last sync)
		case c.conn.State() != zk.StateHasSession:
			wait = every / 4 // look again soon: the session may be back by then
		default:
			_, err := c.conn.Sync("/")
			if err == nil {
				continue
			}
			if !errors.Is(err, zk.ErrClosing) {
				c.log.Debug("zookeeper sync to prove the session alive failed", "err", err)
			}
			wait = every
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-c.closedCh:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// onEvent follows go-zookeeper's session states. It runs on go-zookeeper's event loop, so it only
// updates state and never blocks on the network.
func (c *Client) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	<-c.connReady
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateClosed {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		c.sessionEstablishedLocked(c.conn.SessionID())
	case zk.StateExpired:
		c.loseLocked(fmt.Errorf("%w: ZooKeeper session %#x expired", ErrLost, c.gen.sessionIDOrZero()))
		c.log.Warn("zookeeper session expired")
	case zk.StateDisconnected, zk.StateConnecting, zk.StateConnected:
		if c.state == stateOpen || c.state == stateResuming {
			c.log.Warn("zookeeper connection lost; leases held until the session deadline",
				"left", (c.deadline() - c.now()).String())
			c.setStateLocked(stateSuspended)
		}
	}
}

func (c *Client) sessionEstablishedLocked(id int64) {
	first := c.state == stateConnecting
	if c.gen == nil || c.gen.sessionID != id || c.gen.ended() {
		c.startGenerationLocked(id)
	}
	c.lostWhileConnected.Store(false)
	if first {
		c.setStateLocked(stateOpen) // no watch yet for go-zookeeper to set again
		return
	}
	c.setStateLocked(stateResuming)
	c.resumes++
	resume := c.resumes
	time.AfterFunc(watchResetGrace, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.state == stateResuming && c.resumes == resume {
			c.setStateLocked(stateOpen)
		}
	})
}

func (c *Client) startGenerationLocked(id int64) {
	if c.gen != nil {
		c.gen.end(fmt.Errorf("%w: ZooKeeper session %#x ended", ErrLost, c.gen.sessionID))
	}
	c.gen = newGeneration(id)
	c.armDeadlineLocked()
	c.log.Info("zookeeper session established", "session", fmt.Sprintf("%#x", id),
		"timeout", time.Duration(c.timeout.Load()).String())
}

// armDeadlineLocked checks the deadline when it is due. It does not follow every reply: when it
// fires and replies have moved the deadline on, it sets itself for the new one.
func (c *Client) armDeadlineLocked() {
	if c.deadlineTimer != nil {
		c.deadlineTimer.Stop()
	}
	gen := c.gen
	var check func()
	check = func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.gen != gen || gen.ended() {
			return
		}
		if left := c.deadline() - c.now(); left > 0 {
			c.deadlineTimer = time.AfterFunc(left, check)
			return
		}
		c.expireDeadlineLocked()
	}
	c.deadlineTimer = time.AfterFunc(max(c.deadline()-c.now(), 0), check)
}

// expireDeadlineLocked ends the generation once nothing proves the session alive any longer.
func (c *Client) expireDeadlineLocked() {
	t := time.Duration(c.timeout.Load())
	since := c.now() - time.Duration(c.provedAt.Load())
	c.log.Warn("the leader not heard to touch the session for too long: leases lost",
		"session_timeout", t.String(), "margin", leaseMargin(t).String(), "since", since.String())
	if c.state == stateOpen || c.state == stateResuming {
		c.lostWhileConnected.Store(true)
	}
	c.loseLocked(fmt.Errorf("%w: no answer has proved the session alive at the ZooKeeper leader for %v, the session may have expired",
		ErrLost, since.Round(time.Millisecond)))
}

// checkDeadline ends the generation now if its deadline has passed, so that a caller deciding on
// a lease does not depend on when the timer goroutine runs.
func (c *Client) checkDeadline() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != nil && !c.gen.ended() && c.now() >= c.deadline() && c.state != stateClosed {
		c.expireDeadlineLocked()
	}
}

func (c *Client) loseLocked(err error) {
	if c.gen != nil {
		c.gen.end(err)
	}
	if c.state != stateConnecting {
		c.setStateLocked(stateLost)
	}
}

func (c *Client) setStateLocked(s sessionState) {
	if c.state == s {
		return
	}
	if us, ok := userState(c.state, s); ok {
		c.listener.send(us)
	}
	wasOpen := c.state == stateOpen
	c.state = s
	switch {
	case s == stateOpen:
		close(c.sessionUp)
	case wasOpen:
		c.sessionUp = make(chan struct{})
	}
}

// userState is what a transition of the machine means to a user (see State); resuming to open is
// invisible, the grace being an implementation detail.
func userState(from, to sessionState) (State, bool) {
	switch {
	case to == stateClosed:
		return StateClosed, true
	case to == stateLost:
		return StateLost, true
	case to == stateSuspended:
		return StateSuspended, true
	case from == stateConnecting && to == stateOpen:
		return StateConnected, true
	case to == stateResuming, from == stateLost && to == stateOpen:
		return StateReconnected, true
	}
	return 0, false
}

func (g *generation) sessionIDOrZero() int64 {
	if g == nil {
		return 0
	}
	return g.sessionID
}

type noWaitKey struct{}

// withNoWait marks a context whose calls answer ErrNoSession at once rather than wait for a
// session: TryLock's, and Unlock's.
func withNoWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, noWaitKey{}, true)
}

// session waits until the client has a live session and returns its generation.
func (c *Client) session(ctx context.Context) (*generation, error) {
	for {
		c.mu.Lock()
		switch c.state {
		case stateClosed:
			c.mu.Unlock()
			return nil, ErrClosed
		case stateOpen:
			g := c.gen
			c.mu.Unlock()
			return g, nil
		}
		up := c.sessionUp
		state := c.state
		c.mu.Unlock()
		if ctx.Value(noWaitKey{}) != nil {
			return nil, fmt.Errorf("%w (%s)", ErrNoSession, state)
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a ZooKeeper session: %w", ctx.Err())
		case <-c.closedCh:
			return nil, ErrClosed
		}
	}
}

// trusted reports whether leases of gen may still be relied on right now.
func (c *Client) trusted(gen *generation) bool {
	c.checkDeadline()
	return !gen.ended()
}
