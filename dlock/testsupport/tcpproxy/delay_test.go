package tcpproxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with itself.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// A slow link delays each way, and delivers everything; SetDelay(0) makes it fast again.
func TestSetDelaySlowsBothWays(t *testing.T) {
	p := NewRaw(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func() time.Duration {
		start := time.Now()
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("echo: %q, %v", line, err)
		}
		return time.Since(start)
	}
	roundTrip()
	const d = 150 * time.Millisecond
	p.SetDelay(d)
	if got := roundTrip(); got < 2*d {
		t.Errorf("round trip %v through a link delayed %v each way: want at least %v", got, d, 2*d)
	}
	p.SetDelay(0)
	if got := roundTrip(); got >= d {
		t.Errorf("round trip %v after the delay was lifted", got)
	}
}

// A slow link is latency, not a throughput cap: frames sent together arrive together, each its
// delay after it was sent, not one delay after another.
func TestSetDelayPipelines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // echoes bytes as they come
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	p := NewMySQL(t, ln.Addr().String()) // read one frame at a time, as a client's requests
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n, d = 10, 200 * time.Millisecond
	p.SetDelay(d)
	var frames []byte
	for i := range n {
		frames = append(frames, 4, 0, 0, byte(i), 'p', 'i', 'n', 'g')
	}
	start := time.Now()
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(frames))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if !bytes.Equal(got, frames) {
		t.Fatalf("echoed %q, want %q", got, frames)
	}
	if took < 2*d {
		t.Errorf("%d frames echoed in %v through a link delayed %v each way: want at least %v", n, took, d, 2*d)
	}
	if limit := n * d / 2; took >= limit {
		t.Errorf("%d pipelined frames echoed in %v through a link delayed %v each way: want under %v (the delay is latency, not one frame per delay)", n, took, d, limit)
	}
}
