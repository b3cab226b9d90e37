// Package tcpproxy is a loopback TCP proxy that tests put between a client and its server (a
// ZooKeeper client, or a MySQL one), so they can cut the connection at will or right after a
// chosen request is sent, or partition it silently: connections stay open and nothing arrives, as
// behind a dead switch or with a paused VM, where nobody closes a socket and the client learns
// nothing.
//
// It is test support for dlock's tests and the service's, not part of dlock's API: it may change
// in any release.
package tcpproxy

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards connections from Addr to the target until Cut.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	frames framing
	armed  func(frame []byte, index int) bool
	drop   bool // when armed fires, the request is not forwarded
	hole   bool // when armed fires, the request is swallowed and its connection black-holed
	hold   bool // once armed fires, refuse connections until Restore
	cutAll bool // once armed fires, also close every other connection
	// stallAt: when armed fires, the proxy stalls before the request is forwarded (StallAtQuery)
	stallAt    bool
	stallFired chan struct{}
	closed     bool
	flow       chan struct{} // closed while bytes may pass; open during a Stall
	// holdCloses keeps a connection open during a Stall when either end closes it, until Resume:
	// a peer that gives up on a black hole must not tell the other end so (see NewRaw).
	holdCloses bool
	// delay holds every chunk back this long (nanoseconds) after it was read before it is
	// forwarded, either way: a slow link, not a cut one (SetDelay, pipe).
	delay atomic.Int64
	// traffic counts the passes of chunks (requests, pieces of replies) through the proxy's gate,
	// held those that had to wait there for a Resume: what a Stall or a delay met (Traffic).
	traffic, held atomic.Int64
	wg            sync.WaitGroup
}

// Traffic counts, since the proxy started, the passes of chunks (requests, pieces of replies)
// through its gate (a request passes it twice), and those a Stall held back: a fault on the link
// took effect only if they grew while it was on.
func (p *Proxy) Traffic() (passes, held int64) { return p.traffic.Load(), p.held.Load() }

// New starts a proxy to a ZooKeeper server; it stops when the test ends.
func New(t testing.TB, target string) *Proxy { return start(t, target, zooKeeperFrames, false) }

// NewMySQL starts a proxy to a MySQL (or MariaDB) server; it stops when the test ends.
func NewMySQL(t testing.TB, target string) *Proxy { return start(t, target, mySQLFrames, false) }

// NewRaw starts a proxy that passes bytes as they come, whatever the protocol: for the links
// between ZooKeeper peers (quorum and election), which are not framed as client requests are. It
// has no armed cuts. During a Stall it is a true black hole: when one end closes its connection
// (a ZooKeeper peer whose read timed out), the other end learns nothing until Resume, as behind a
// dead switch.
func NewRaw(t testing.TB, target string) *Proxy { return start(t, target, rawChunks, true) }

// OpenRaw is NewRaw for a caller that may not be a test's goroutine: it returns an error instead
// of failing a test, and the caller stops the proxy with Close.
func OpenRaw(target string) (*Proxy, error) { return open(target, rawChunks, true) }

func start(t testing.TB, target string, frames framing, holdCloses bool) *Proxy {
	t.Helper()
	p, err := open(target, frames, holdCloses)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func open(target string, frames framing, holdCloses bool) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, frames: frames, holdCloses: holdCloses, conns: map[net.Conn]struct{}{}, flow: make(chan struct{})}
	close(p.flow)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection and refuses new ones until Restore: to the client the server
// is gone, and the server hears nothing from the client's session.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Stall partitions silently: every connection, open or new, stays open, but no byte passes in
// either direction until Resume. The bytes sent meanwhile wait, as TCP retransmits them, and
// arrive after Resume unless an end gave up on the connection first.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flow:
		p.flow = make(chan struct{})
	default:
	}
}

// Resume ends a Stall.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flow:
	default:
		close(p.flow)
	}
}

// SetDelay makes the link slow: every request and every chunk of a reply is forwarded d after it
// was read (0: none), as on a far-away route; what is read meanwhile travels at the same time, so
// the link's throughput stays. Bytes still arrive, in order; a connection is never cut by it, so
// a client sees latency, not errors, until its own timeouts. A new delay applies to the bytes
// read after it is set.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// waitFlow blocks while the proxy is stalled.
func (p *Proxy) waitFlow() {
	p.mu.Lock()
	flow := p.flow
	p.mu.Unlock()
	p.traffic.Add(1)
	select {
	case <-flow:
	default:
		p.held.Add(1)
		<-flow
	}
}

// CutAfterRequest arms the proxy: the next ZooKeeper request whose opcode matches is forwarded to
// the server, and then that connection is closed before any reply reaches the client. New
// connections are still let through, so the client reconnects with the same session.
func (p *Proxy) CutAfterRequest(match func(opcode int32) bool) {
	p.arm(zooKeeperOpcode(match), false, false, false)
}

// CutAfterRequestAndHold is CutAfterRequest, but the proxy then refuses new connections until
// Restore: the client learns nothing of its request's fate while the session lives on.
func (p *Proxy) CutAfterRequestAndHold(match func(opcode int32) bool) {
	p.arm(zooKeeperOpcode(match), false, true, true)
}

// CutAfterQuery arms a MySQL proxy: the next text query that matches (COMMIT, say) is forwarded
// to the server, which acts on it, and then that connection is closed before the reply reaches
// the client. With hold, every other connection is closed too and new ones are refused until
// Restore: the client cannot learn what became of its query until then.
func (p *Proxy) CutAfterQuery(match func(query string) bool, hold bool) {
	p.arm(mySQLQuery(match), false, hold, hold)
}

// DropQuery arms a MySQL proxy: the next text query that matches is never forwarded; its
// connection is closed instead, so the server sees the client vanish before that query.
func (p *Proxy) DropQuery(match func(query string) bool) {
	p.arm(mySQLQuery(match), true, false, false)
}

// DropQueryAndHold is DropQuery, but every other connection is closed too and new ones are
// refused until Restore: the server rolls the query's transaction back, and the client can learn
// nothing of it until then. The returned channel closes when it fired.
func (p *Proxy) DropQueryAndHold(match func(query string) bool) <-chan struct{} {
	fired := make(chan struct{})
	var once sync.Once
	p.arm(func(frame []byte, index int) bool {
		if !mySQLQuery(match)(frame, index) {
			return false
		}
		once.Do(func() { close(fired) })
		return true
	}, true, true, true)
	return fired
}

// BlackHoleQuery arms a MySQL proxy: the next text query that matches (COMMIT, say) is swallowed,
// and from then on its connection is a black hole, as behind a dead route: both ends stay open,
// nothing more passes either way, and neither end learns when the other closes. The server never
// sees the query; the client waits for an answer that never comes, until its own timeout. Other
// connections, open or new, pass as before.
func (p *Proxy) BlackHoleQuery(match func(query string) bool) {
	p.mu.Lock()
	p.armed, p.drop, p.hold, p.cutAll, p.hole, p.stallAt = mySQLQuery(match), false, false, false, true, false
	p.mu.Unlock()
}

// StallAtQuery arms a MySQL proxy: when the next text query that matches (COMMIT, say) arrives,
// the proxy stalls (see Stall) before forwarding it; the query reaches the server after Resume,
// as a packet held up in the network does. The client waits for its answer meanwhile, and may
// give up on it while the server has yet to act. The returned channel closes when it fired.
func (p *Proxy) StallAtQuery(match func(query string) bool) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.drop, p.hold, p.cutAll, p.hole, p.stallAt = mySQLQuery(match), false, false, false, false, true
	p.stallFired = make(chan struct{})
	return p.stallFired
}

// Disarm forgets an armed request that has not come yet; a stall it already began lasts until
// Resume.
func (p *Proxy) Disarm() {
	p.mu.Lock()
	p.armed, p.stallAt = nil, false
	p.mu.Unlock()
}

func (p *Proxy) arm(match func(frame []byte, index int) bool, drop, hold, cutAll bool) {
	p.mu.Lock()
	p.armed, p.drop, p.hold, p.cutAll, p.hole, p.stallAt = match, drop, hold, cutAll, false, false
	p.mu.Unlock()
}

// Close stops the proxy and its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.Resume()
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.cut || p.closed
		p.mu.Unlock()
		if refuse {
			_ = client.Close()
			continue
		}
		if p.holdCloses {
			// A black hole swallows the connection attempt too: the target hears of it only
			// after Resume, as a SYN behind a dead switch would be retransmitted.
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.waitFlow()
				p.serve(client)
			}()
			continue
		}
		p.serve(client)
	}
}

// serve connects one accepted client to the target and forwards between them.
func (p *Proxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.cut || p.closed { // cut or closed while the attempt was held back
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	p.mu.Unlock()
	closeBoth := func() {
		if p.holdCloses {
			p.waitFlow()
		}
		_ = client.Close()
		_ = server.Close()
	}
	// Set before an armed request goes to the server, so that no byte of its reply can reach
	// the client, however the two goroutines are scheduled.
	var repliesCut, holed atomic.Bool
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		p.forwardRequests(server, client, closeBoth, &repliesCut, &holed)
		if holed.Load() {
			_ = client.Close() // a black hole: the server does not learn of it
			return
		}
		closeBoth()
	}()
	go func() {
		defer p.wg.Done()
		p.forwardReplies(client, server, &repliesCut, &holed)
		if holed.Load() {
			_ = server.Close() // nor the client of this
			return
		}
		closeBoth()
	}()
}

// forwardRequests copies the client's requests to the server one frame at a time, so that an
// armed proxy can act on the request it waits for. Every request read before it has been
// forwarded before it acts.
func (p *Proxy) forwardRequests(server, client net.Conn, closeBoth func(), repliesCut, holed *atomic.Bool) {
	out := p.newPipe(server, nil)
	defer out.close()
	for index := 0; ; index++ {
		frame, err := p.frames(client)
		if err != nil {
			return
		}
		if holed.Load() {
			continue // swallowed, as everything after the black hole opened
		}
		p.waitFlow()
		fired, drop, cutAll, hole := p.fire(frame, index)
		p.waitFlow() // a request that stalled the proxy (StallAtQuery) goes on after Resume
		if fired && hole {
			holed.Store(true)
			continue
		}
		if fired && drop {
			out.flush()
			closeBoth()
			if cutAll {
				p.closeAllBut(nil)
			}
			return
		}
		if fired {
			repliesCut.Store(true)
		}
		if !out.send(frame) {
			return
		}
		if fired {
			if !out.flush() {
				return
			}
			// The client loses the connection before any reply; the server side stays open a
			// moment longer so the request is surely read and applied, as when a reply is lost.
			_ = client.Close()
			if cutAll {
				p.closeAllBut(server)
			}
			time.Sleep(200 * time.Millisecond)
			closeBoth()
			return
		}
	}
}

// forwardReplies copies bytes from server to client, holding them back during a Stall; none
// passes once the replies are cut, nor into a black hole.
func (p *Proxy) forwardReplies(client, server net.Conn, repliesCut, holed *atomic.Bool) {
	out := p.newPipe(client, func() (write, goOn bool) {
		return !holed.Load(), !repliesCut.Load()
	})
	defer out.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && !out.send(append([]byte(nil), buf[:n]...)) {
			return
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) fire(frame []byte, index int) (fired, drop, cutAll, hole bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed == nil || !p.armed(frame, index) {
		return false, false, false, false
	}
	p.armed = nil
	if p.stallAt {
		p.stallAt = false
		select {
		case <-p.flow:
			p.flow = make(chan struct{})
		default:
		}
		close(p.stallFired)
		return false, false, false, false // forwarded as usual, once the stall ends
	}
	if p.hold {
		p.cut = true
	}
	return true, p.drop, p.cutAll, p.hole
}

// closeAllBut closes every connection but one.
func (p *Proxy) closeAllBut(keep net.Conn) {
	p.mu.Lock()
	var others []net.Conn
	for c := range p.conns {
		if c != keep {
			others = append(others, c)
			delete(p.conns, c)
		}
	}
	p.mu.Unlock()
	for _, c := range others {
		_ = c.Close()
	}
}
