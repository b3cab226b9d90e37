// Package tcpproxy is a loopback TCP proxy that tests put between a ZooKeeper client and its
// server, so they can cut the connection at will or right after a chosen request is sent, or
// partition it silently: connections stay open and nothing arrives, as behind a dead switch or
// with a paused VM, where nobody closes a socket and the client learns nothing.
package tcpproxy

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
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
	armed  func(opcode int32) bool
	hold   bool // once armed fires, refuse connections until Restore
	closed bool
	flow   chan struct{} // closed while bytes may pass; open during a Stall
	wg     sync.WaitGroup
}

// New starts a proxy to target; it stops when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, flow: make(chan struct{})}
	close(p.flow)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
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

// waitFlow blocks while the proxy is stalled.
func (p *Proxy) waitFlow() {
	p.mu.Lock()
	flow := p.flow
	p.mu.Unlock()
	<-flow
}

// CutAfterRequest arms the proxy: the next ZooKeeper request whose opcode matches is forwarded to
// the server, and then that connection is closed before any reply reaches the client. New
// connections are still let through, so the client reconnects with the same session.
func (p *Proxy) CutAfterRequest(match func(opcode int32) bool) {
	p.mu.Lock()
	p.armed, p.hold = match, false
	p.mu.Unlock()
}

// CutAfterRequestAndHold is CutAfterRequest, but the proxy then refuses new connections until
// Restore: the client learns nothing of its request's fate while the session lives on.
func (p *Proxy) CutAfterRequestAndHold(match func(opcode int32) bool) {
	p.mu.Lock()
	p.armed, p.hold = match, true
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
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client] = struct{}{}
		p.conns[server] = struct{}{}
		p.mu.Unlock()
		closeBoth := func() { _ = client.Close(); _ = server.Close() }
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			defer closeBoth()
			p.forwardRequests(server, client, closeBoth)
		}()
		go func() {
			defer p.wg.Done()
			defer closeBoth()
			p.forwardReplies(client, server)
		}()
	}
}

// forwardRequests copies ZooKeeper frames (4-byte length, then the body) from client to server.
// The first frame is the session handshake; every later one starts with xid and opcode.
func (p *Proxy) forwardRequests(server, client net.Conn, closeBoth func()) {
	first := true
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(client, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > 16<<20 {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(client, body); err != nil {
			return
		}
		p.waitFlow()
		if _, err := server.Write(append(hdr[:], body...)); err != nil {
			return
		}
		if first {
			first = false
			continue
		}
		if len(body) >= 8 {
			opcode := int32(binary.BigEndian.Uint32(body[4:8]))
			if p.fire(opcode) {
				// The client loses the connection before any reply; the server side stays open a
				// moment longer so the request is surely read and applied, as when a reply is lost.
				_ = client.Close()
				time.Sleep(200 * time.Millisecond)
				closeBoth()
				return
			}
		}
	}
}

// forwardReplies copies bytes from server to client, holding them back during a Stall.
func (p *Proxy) forwardReplies(client, server net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			p.waitFlow()
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) fire(opcode int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed == nil || !p.armed(opcode) {
		return false
	}
	p.armed = nil
	if p.hold {
		p.cut = true
	}
	return true
}
