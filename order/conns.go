package order

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// The connections of the open port, bounded: a request's line and headers are at most
// maxHeaderBytes (Go's server reads 4 KiB more before it refuses them with 431, so a connection
// holds at most about 20 KiB of them, not Go's default of 1 MiB), one client (a remote IP
// address) holds at most Config.ConnsPerClient connections at once, and the answers Go's server
// gives itself, before any handler runs (431, a malformed request's 400, 501, 505), go out as
// the API's {"error","code"} JSON, as a refused connection's 429 does.
const maxHeaderBytes = 16 << 10

// What a connection refused for its client's cap is given: refuseWait to take the answer, and at
// most maxRefusing such answers at once (past them a refused connection is closed unanswered),
// so that refusing costs no more than the cap saves.
const (
	refuseWait  = time.Second
	maxRefusing = 64
)

// HTTPServer is the http.Server Run serves the API with: the timeouts (run.go), the header
// bound (maxHeaderBytes), the live streams' connections (ConnContext). Serve it on Listener(ln).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout(s.sales.LongestChange()), IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ConnContext: s.ConnContext, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
}

// Listener wraps the API's listener: each client (remote IP) holds at most Config.ConnsPerClient
// of its connections, and Go's own refusals on them are written as JSON (jsonConn).
func (s *Server) Listener(ln net.Listener) net.Listener {
	return &clientListener{Listener: ln, max: s.cfg.ConnsPerClient, open: map[netip.Addr]int{},
		refusing: make(chan struct{}, maxRefusing), log: s.log}
}

type clientListener struct {
	net.Listener
	max      int
	log      *slog.Logger
	refusing chan struct{} // a token per refusal being answered
	mu       sync.Mutex
	open     map[netip.Addr]int // connections open per client
}

// Accept hands out the next connection whose client is under its cap, and refuses the others.
func (l *clientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		if l.open[ip] >= l.max {
			l.mu.Unlock()
			l.refuse(c)
			continue
		}
		l.open[ip]++
		l.mu.Unlock()
		jc := &jsonConn{Conn: c}
		jc.release = sync.OnceFunc(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[ip]--; l.open[ip] <= 0 {
				delete(l.open, ip)
			}
		})
		return jc, nil
	}
}

// refuse answers a connection over its client's cap with 429 too_many_connections and closes it,
// in the background and within refuseWait; past maxRefusing answers at once, it closes it now.
func (l *clientListener) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(refuseWait))
		e := newError(http.StatusTooManyRequests, "too_many_connections",
			fmt.Sprintf("this client already holds %d connections to this replica: reuse them, or close some", l.max))
		if _, err := c.Write(rawAnswer(e)); err != nil {
			return
		}
		// Read what the client sends until it closes or refuseWait ends, so that closing does
		// not reset the connection before the client has read the answer.
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 2<<20))
	}()
}

func remoteIP(c net.Conn) netip.Addr { return addrOf(c.RemoteAddr().String()) }

// clientAddr is the client a request counts against: its connection's remote IP address, never
// a header a client may set (X-Forwarded-For): behind a proxy or a NAT, every client is its address.
func clientAddr(r *http.Request) netip.Addr { return addrOf(r.RemoteAddr) }

// addrOf is the client at hostPort: its IPv4 address, or its IPv6 address's /64 (what one host
// is usually given); the zero Addr when it is not an IP address (a test's recorder).
func addrOf(hostPort string) netip.Addr {
	ap, err := netip.ParseAddrPort(hostPort)
	if err != nil {
		return netip.Addr{}
	}
	a := ap.Addr().Unmap()
	if p, err := a.Prefix(64); a.Is6() && err == nil {
		return p.Addr()
	}
	return a
}

// jsonConn is an accepted connection: closing it frees its place in its client's cap, and the
// plain-text answers Go's server writes itself on it are written as the API's JSON instead.
type jsonConn struct {
	net.Conn
	release func()
}

func (c *jsonConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// CloseWrite lets Go's server half-close the connection after its 431, as it does a TCP one.
func (c *jsonConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// goErrorHeaders is what Go's server (net/http, conn.serve) writes after the status line of an
// answer it gives itself, in one Write: no response of a handler has it there, as a handler's
// headers are written sorted (Connection before Content-Type) and with a Date.
var goErrorHeaders = []byte("\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n")

func (c *jsonConn) Write(p []byte) (int, error) {
	if e := goError(p); e != nil {
		if _, err := c.Conn.Write(rawAnswer(e)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// goError is the API's answer for one of Go's own ("HTTP/1.1 431 Request Header Fields Too
// Large", "HTTP/1.1 400 Bad Request: invalid header value", ...), or nil when p is not one.
func goError(p []byte) *apiError {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !ok {
		return nil
	}
	end := bytes.Index(rest, []byte("\r\n"))
	if end < 3 || !bytes.HasPrefix(rest[end:], goErrorHeaders) {
		return nil
	}
	status, err := strconv.Atoi(string(rest[:3]))
	if err != nil {
		return nil
	}
	reason := ""
	if _, r, ok := bytes.Cut(rest[:end], []byte(": ")); ok {
		reason = string(r) // Go's fixed text: "invalid header value", "missing required Host header"
	}
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return newError(http.StatusRequestHeaderFieldsTooLarge, "headers_too_large",
			fmt.Sprintf("the request line and headers are larger than %d bytes", maxHeaderBytes))
	case http.StatusNotImplemented:
		return newError(http.StatusNotImplemented, "unsupported_transfer_encoding", "the Transfer-Encoding is not supported: send chunked, or a Content-Length")
	case http.StatusHTTPVersionNotSupported:
		return newError(http.StatusHTTPVersionNotSupported, "unsupported_http_version", "the HTTP version is not supported: send HTTP/1.1")
	}
	if reason == "" {
		reason = "a malformed request line or header, a Content-Length given twice or not a number, a Transfer-Encoding beside it"
	}
	return badRequest("the request is not valid HTTP/1.1: " + reason)
}

// rawAnswer is e as a whole HTTP/1.1 response that closes the connection.
func rawAnswer(e *apiError) []byte {
	body, _ := json.Marshal(e) // an apiError always encodes
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		e.Status, http.StatusText(e.Status), len(body), body)
}
