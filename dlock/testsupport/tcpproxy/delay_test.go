package tcpproxy

import (
	"bufio"
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
