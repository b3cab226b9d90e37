// Command zkstat shows what each ZooKeeper server says of itself (the srvr four-letter word): its
// mode (leader, follower, standalone), the last transaction id it has seen and its client
// connections. With -leader it prints only the leader's name, for scripts.
//
//	zkstat [-leader] [-timeout 2s] [NAME=]HOST:PORT ...
//
// A server that does not answer (or has no quorum) is listed as down; the exit status is 1 when
// none answers, or with -leader when none leads.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type server struct{ name, addr string }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zkstat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	leaderOnly := fs.Bool("leader", false, "print only the name of the server that leads")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for each server")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zkstat [-leader] [-timeout 2s] [NAME=]HOST:PORT ...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	servers, err := parseServers(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "zkstat: %v\n", err)
		fs.Usage()
		return 2
	}
	up := 0
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	if !*leaderOnly {
		fmt.Fprintln(tw, "server\taddress\tmode\tzxid\tconnections\tnodes")
	}
	for _, s := range servers {
		st, err := srvr(s.addr, *timeout)
		switch {
		case err != nil:
			if !*leaderOnly {
				fmt.Fprintf(tw, "%s\t%s\tdown\t-\t-\t-\n", s.name, s.addr)
			}
		case *leaderOnly:
			if st["Mode"] == "leader" {
				fmt.Fprintln(stdout, s.name)
				return 0
			}
		default:
			up++
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.name, s.addr, st["Mode"], st["Zxid"], st["Connections"], st["Node count"])
		}
	}
	if *leaderOnly {
		fmt.Fprintln(stderr, "zkstat: no server leads")
		return 1
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "zkstat: %v\n", err)
		return 1
	}
	if up == 0 {
		fmt.Fprintln(stderr, "zkstat: no server answers")
		return 1
	}
	return 0
}

// srvr asks one server the srvr four-letter word and returns its "Key: value" lines. (go-zookeeper's
// FLWSrvr cannot parse the build line of Debian's ZooKeeper 3.8.)
func srvr(addr string, timeout time.Duration) (map[string]string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, fmt.Errorf("deadline %s: %w", addr, err)
	}
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return nil, fmt.Errorf("srvr to %s: %w", addr, err)
	}
	raw, err := io.ReadAll(conn)
	if err != nil {
		return nil, fmt.Errorf("srvr from %s: %w", addr, err)
	}
	st := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			st[k] = strings.TrimSpace(v)
		}
	}
	if st["Mode"] == "" {
		// "This ZooKeeper instance is not currently serving requests": no quorum.
		return nil, fmt.Errorf("%s does not serve: %s", addr, strings.TrimSpace(string(raw)))
	}
	return st, nil
}

func parseServers(args []string) ([]server, error) {
	if len(args) == 0 {
		return nil, errors.New("name at least one server")
	}
	servers := make([]server, len(args))
	for i, a := range args {
		name, addr, named := strings.Cut(a, "=")
		if !named {
			name, addr = a, a
		}
		host, port, ok := strings.Cut(addr, ":")
		if name == "" || !ok || host == "" || port == "" || strings.ContainsAny(port, ":/") {
			return nil, fmt.Errorf("%q is not [NAME=]HOST:PORT", a)
		}
		servers[i] = server{name, addr}
	}
	return servers, nil
}
