package dlock_test

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
)

// A follower answers reads and pings on its own and passes its sessions' touches to the leader
// only in its answers to the leader's pings. Cut off from its leader it goes on answering clients
// for up to syncLimit × tickTime, while the leader, hearing nothing of the session, expires it and
// hands the lock on. The holder's Lost must close before the other client holds all the same,
// whether the client knows the servers' tick or assumes the longest one.
//
// Two holders, one of each, hold two locks through the same follower, and one cut serves both.
func TestLostClosesBeforeAnotherHoldsWhenTheFollowerIsCutOff(t *testing.T) {
	const session = 2 * time.Second
	ens := startProxiedEnsemble(t)
	raw := ens.rawConn(t)

	type result struct {
		lostAt     time.Time
		heldAt     time.Time
		holderLost bool // whether the holder's Lost was closed when the other got the lock
		err        error
	}
	type holding struct {
		name   string
		held   *dlock.Lease
		lost   chan time.Time
		next   chan result
		leases chan *dlock.Lease
	}
	cases := []struct {
		name string
		opts []dlock.Option
	}{
		{"tick assumed", nil},
		{"tick known", []dlock.Option{dlock.WithServerTick(ensembleTick)}},
	}
	var holdings []*holding
	for _, tc := range cases {
		holder := connect(t, []string{ens.follower}, append([]dlock.Option{dlock.WithSessionTimeout(session)}, tc.opts...)...)
		if got := holder.SessionTimeout(); got != session {
			t.Fatalf("granted session timeout %v, want %v", got, session)
		}
		path := testenv.UniquePath(t)
		held, err := dlock.NewMutex(holder, path).Lock(ctxTimeout(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		h := &holding{name: tc.name, held: held, lost: make(chan time.Time, 1), next: make(chan result, 1), leases: make(chan *dlock.Lease, 1)}
		holdings = append(holdings, h)
		go func() {
			<-held.Lost()
			h.lost <- time.Now()
		}()
		// The waiter talks to the rest of the quorum only.
		other := connect(t, ens.others, dlock.WithSessionTimeout(session))
		go func() {
			l, err := dlock.NewMutex(other, path).Lock(ctxTimeout(t, 30*time.Second))
			r := result{heldAt: time.Now(), err: err}
			select {
			case <-held.Lost():
				r.holderLost = true
			default:
			}
			h.next <- r
			h.leases <- l
		}()
		waitNodes(t, raw, path, 2)
	}
	// Let the holders' sessions reach their steady rhythm (pings, and whatever dlock sends)
	// before the cut, so that the cut falls in the middle of it.
	time.Sleep(session / 2)

	cutAt := time.Now()
	ens.cutFollower()
	t.Logf("partition of the follower's peer links started")

	for _, h := range holdings {
		r := <-h.next
		if r.err != nil {
			t.Errorf("%s: the other client never got the lock: %v", h.name, r.err)
			continue
		}
		l := <-h.leases
		heldAfter := r.heldAt.Sub(cutAt)
		select {
		case r.lostAt = <-h.lost:
		case <-time.After(3 * session):
			t.Errorf("%s: the cut-off holder's Lost never closed (the other client held %v after the cut)", h.name, heldAfter.Round(time.Millisecond))
			continue
		}
		lostAfter := r.lostAt.Sub(cutAt)
		t.Logf("%s: session %v; partition started at 0; holder's Lost closed at %d ms; other client held at %d ms",
			h.name, session, lostAfter.Milliseconds(), heldAfter.Milliseconds())
		if !r.holderLost || lostAfter >= heldAfter {
			t.Errorf("%s: another client held the lock %v after the partition started, while the cut-off holder's Lost closed only %v after it",
				h.name, heldAfter.Round(time.Millisecond), lostAfter.Round(time.Millisecond))
		}
		if !errors.Is(h.held.Err(), dlock.ErrLost) {
			t.Errorf("%s: lease error %v, want ErrLost", h.name, h.held.Err())
		}
		if l.Token() <= h.held.Token() {
			t.Errorf("%s: next holder's token %d is not above the lost holder's %d", h.name, l.Token(), h.held.Token())
		}
		mustUnlock(t, l)
	}
}

// proxiedEnsemble is a three-peer ZooKeeper ensemble of the test's own whose follower talks to
// its peers (quorum and election links) only through proxies, so that the test can cut it off
// from the leader while its clients still reach it.
type proxiedEnsemble struct {
	follower string   // client address of the follower the proxies cut off
	others   []string // client addresses of the other two peers
	proxies  []*tcpproxy.Proxy
}

// Timing of the test ensemble: a follower cut off from its leader serves its clients for
// syncLimit × tickTime = 3 s, longer than the test's 2 s sessions, as in production ensembles
// whose sessions are short next to that (the compose file's 2 × 2000 ms with sessions of 4 s or
// less, or the ZooKeeper sample's 5 × 2000 ms).
const (
	ensembleTick      = 250 * time.Millisecond
	ensembleSyncLimit = 12
)

// startProxiedEnsemble starts the peers with scripts/servers.sh start-server, which runs them as
// the shared ensemble runs (same JVM options), and stops them when the test ends.
//
// ZooKeeper keeps one election connection per pair of peers, the one the higher id opened; when a
// lower id connects, the higher one hangs up and dials back the address the lower one advertises,
// its own bind address, past any proxy. So the follower cut off is the peer with the highest id,
// started once the other two have formed a quorum: it opens every election connection itself,
// through its proxies, and follows the leader through a proxy too.
func startProxiedEnsemble(t *testing.T) *proxiedEnsemble {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a ZooKeeper ensemble of its own")
	}
	script, err := filepath.Abs("../scripts/servers.sh")
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	type peer struct {
		dir                    string
		client, quorum, elect  int
		proxyQuorum, proxyElec string // how the cut-off peer reaches this one
	}
	peers := make([]*peer, 3)
	taken := map[int]bool{}
	for i := range peers {
		peers[i] = &peer{dir: filepath.Join(base, fmt.Sprintf("zk%d", i+1)), client: freePort(t, taken), quorum: freePort(t, taken), elect: freePort(t, taken)}
	}
	ens := &proxiedEnsemble{follower: fmt.Sprintf("127.0.0.1:%d", peers[2].client)}
	for _, p := range peers[:2] {
		ens.others = append(ens.others, fmt.Sprintf("127.0.0.1:%d", p.client))
		q := tcpproxy.NewRaw(t, fmt.Sprintf("127.0.0.1:%d", p.quorum))
		e := tcpproxy.NewRaw(t, fmt.Sprintf("127.0.0.1:%d", p.elect))
		p.proxyQuorum, p.proxyElec = q.Addr(), e.Addr()
		ens.proxies = append(ens.proxies, q, e)
	}
	// The two others reach the cut-off peer through proxies too, should they ever dial it.
	q3 := tcpproxy.NewRaw(t, fmt.Sprintf("127.0.0.1:%d", peers[2].quorum))
	e3 := tcpproxy.NewRaw(t, fmt.Sprintf("127.0.0.1:%d", peers[2].elect))
	ens.proxies = append(ens.proxies, q3, e3)

	for i, p := range peers {
		var cfg strings.Builder
		fmt.Fprintf(&cfg, "tickTime=%d\ninitLimit=40\nsyncLimit=%d\ndataDir=%s/data\nclientPort=%d\n",
			ensembleTick.Milliseconds(), ensembleSyncLimit, p.dir, p.client)
		cfg.WriteString("clientPortAddress=127.0.0.1\nminSessionTimeout=500\nmaxSessionTimeout=10000\nmaxClientCnxns=0\n")
		cfg.WriteString("4lw.commands.whitelist=*\nadmin.enableServer=false\n")
		for j, o := range peers {
			switch {
			case i == 2 && j != 2: // the cut-off peer sees the others through proxies
				fmt.Fprintf(&cfg, "server.%d=%s:%s\n", j+1, o.proxyQuorum, port(o.proxyElec))
			case i != 2 && j == 2:
				fmt.Fprintf(&cfg, "server.%d=%s:%s\n", j+1, q3.Addr(), port(e3.Addr()))
			default:
				fmt.Fprintf(&cfg, "server.%d=127.0.0.1:%d:%d\n", j+1, o.quorum, o.elect)
			}
		}
		if err := os.MkdirAll(filepath.Join(p.dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{
			"zoo.cfg":   cfg.String(),
			"main":      "org.apache.zookeeper.server.quorum.QuorumPeerMain\n",
			"data/myid": fmt.Sprintf("%d\n", i+1),
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(p.dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func(args ...string) {
		out, err := exec.Command(script, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("servers.sh %v: %v\n%s", args, err, out)
		}
	}
	for _, p := range peers {
		t.Cleanup(func() { run("stop-server", p.dir) })
	}
	run("start-server", peers[0].dir)
	run("start-server", peers[1].dir)
	waitMode(t, fmt.Sprintf("127.0.0.1:%d", peers[0].client), "leader", "follower")
	waitMode(t, fmt.Sprintf("127.0.0.1:%d", peers[1].client), "leader", "follower")
	run("start-server", peers[2].dir)
	waitMode(t, ens.follower, "follower")
	return ens
}

// cutFollower black-holes every link between the follower and its peers: connections stay open,
// nothing passes, and neither end learns of the other giving up.
func (e *proxiedEnsemble) cutFollower() {
	for _, p := range e.proxies {
		p.Stall()
	}
}

// rawConn is a plain go-zookeeper connection to the peers not cut off.
func (e *proxiedEnsemble) rawConn(t testing.TB) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(e.others, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatalf("zk connect: %v", err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// waitMode waits until the server at addr serves in one of the modes (srvr's "Mode:" line).
func waitMode(t *testing.T, addr string, modes ...string) {
	t.Helper()
	var last string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		last = serverMode(addr)
		for _, m := range modes {
			if last == m {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("ZooKeeper at %s: mode %q after 60 s, want one of %v", addr, last, modes)
}

func serverMode(addr string) string {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "unreachable"
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return "unreachable"
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if mode, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return mode
		}
	}
	return "not serving"
}

// freePort is a port nothing listens on, below Linux's ephemeral range, as scripts/servers.sh
// picks them: a port in that range can be taken by some client's outgoing connection before the
// peer binds it.
func freePort(t *testing.T, taken map[int]bool) int {
	t.Helper()
	for range 200 {
		p := 10000 + rand.IntN(22000)
		if taken[p] {
			continue
		}
		taken[p] = true
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			_ = ln.Close()
			return p
		}
	}
	t.Fatal("no free port found")
	return 0
}

// port is the port of a host:port address.
func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
