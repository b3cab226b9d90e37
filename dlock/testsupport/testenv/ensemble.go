package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock/testsupport/tcpproxy"
)

// EnsembleTiming is a proxied ensemble's zoo.cfg timing. A follower cut off from its leader goes
// on serving its clients for up to SyncLimit × Tick.
type EnsembleTiming struct {
	Tick                   time.Duration
	InitLimit, SyncLimit   int
	MinSession, MaxSession time.Duration
}

// ProxiedEnsemble is a three-peer ZooKeeper ensemble of a test's own whose peers are configured to
// reach one another (quorum and election links) through proxies, one per direction of each pair,
// so that a test can cut a follower off from its leader while clients still reach both.
//
// What the proxies always cut is the follower's quorum link: a follower dials its leader's quorum
// port from its own configuration (reconfig is off), so through its own proxy, and cut off it
// stops serving after syncLimit × tickTime. An election connection may bypass them: ZooKeeper
// keeps one per pair, the one the higher id opened, and when a lower id dials a higher one, the
// higher hangs up and dials back the address the lower advertises, its bind address. Such a
// direct link only lets a cut follower find the leader again, not follow it. The peers start in
// id order, the highest last once the others have formed a quorum, so that it opens its election
// connections itself, through its proxies: cutting it (CutOff(2, 0, 1)) silences every link it
// has, until a peer restarts.
type ProxiedEnsemble struct {
	Addrs []string // the peers' client addresses, by id - 1
	Dirs  []string // their server directories (scripts/servers.sh start-server, stop-server)
	// links[from][to] are the quorum and election proxies through which peer from reaches peer to.
	links [3][3][]*tcpproxy.Proxy
	base  string // the directory the peers' directories sit in, removed by Close
}

// StartProxiedEnsemble starts the peers with scripts/servers.sh start-server (the JVM options of
// the shared ensemble) and stops them when the test ends. Under `servers.sh run` their directories
// sit in its own, so that its exit stops them too when the test process dies before its cleanups.
func StartProxiedEnsemble(t testing.TB, timing EnsembleTiming) *ProxiedEnsemble {
	t.Helper()
	e, err := NewProxiedEnsemble(timing)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// NewProxiedEnsemble is StartProxiedEnsemble for a caller that may not be a test's goroutine (one
// that starts the next test's ensemble while the current test runs): it returns an error instead
// of failing a test, and the caller stops the ensemble with Close. On an error nothing it started
// is left running.
func NewProxiedEnsemble(timing EnsembleTiming) (_ *ProxiedEnsemble, err error) {
	base, err := os.MkdirTemp(os.Getenv("ZKSTOCK_SERVERS_DIR"), "proxied-") // "": os.TempDir
	if err != nil {
		return nil, fmt.Errorf("proxied ensemble: %w", err)
	}
	e := &ProxiedEnsemble{base: base}
	defer func() {
		if err != nil {
			_ = e.Close()
		}
	}()
	type peer struct {
		dir                   string
		client, quorum, elect int
	}
	var peers [3]peer
	taken := map[int]bool{}
	for i := range peers {
		peers[i].dir = filepath.Join(base, fmt.Sprintf("zk%d", i+1))
		for _, port := range []*int{&peers[i].client, &peers[i].quorum, &peers[i].elect} {
			if *port, err = pickPort(taken); err != nil {
				return nil, err
			}
		}
		e.Addrs = append(e.Addrs, fmt.Sprintf("127.0.0.1:%d", peers[i].client))
	}
	for from := range peers {
		for to, p := range peers {
			if from == to {
				continue
			}
			for _, port := range []int{p.quorum, p.elect} {
				proxy, err := tcpproxy.OpenRaw(fmt.Sprintf("127.0.0.1:%d", port))
				if err != nil {
					return nil, err
				}
				e.links[from][to] = append(e.links[from][to], proxy)
			}
		}
	}
	for i, p := range peers {
		var cfg strings.Builder
		fmt.Fprintf(&cfg, "tickTime=%d\ninitLimit=%d\nsyncLimit=%d\ndataDir=%s/data\nclientPort=%d\n",
			timing.Tick.Milliseconds(), timing.InitLimit, timing.SyncLimit, p.dir, p.client)
		fmt.Fprintf(&cfg, "clientPortAddress=127.0.0.1\nminSessionTimeout=%d\nmaxSessionTimeout=%d\nmaxClientCnxns=0\n",
			timing.MinSession.Milliseconds(), timing.MaxSession.Milliseconds())
		cfg.WriteString("4lw.commands.whitelist=*\nadmin.enableServer=false\n")
		for j, o := range peers {
			if j == i {
				fmt.Fprintf(&cfg, "server.%d=127.0.0.1:%d:%d\n", j+1, o.quorum, o.elect)
				continue
			}
			quorum, elect := e.links[i][j][0].Addr(), e.links[i][j][1].Addr()
			fmt.Fprintf(&cfg, "server.%d=%s:%s\n", j+1, quorum, portOf(elect))
		}
		if err := os.MkdirAll(filepath.Join(p.dir, "data"), 0o755); err != nil {
			return nil, fmt.Errorf("proxied ensemble: %w", err)
		}
		files := map[string]string{
			"zoo.cfg":   cfg.String(),
			"main":      "org.apache.zookeeper.server.quorum.QuorumPeerMain\n",
			"data/myid": fmt.Sprintf("%d\n", i+1),
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(p.dir, name), []byte(content), 0o644); err != nil {
				return nil, fmt.Errorf("proxied ensemble: %w", err)
			}
		}
	}
	start := func(i int, modes ...string) error {
		e.Dirs = append(e.Dirs, peers[i].dir) // Close stops the peers in Dirs
		if err := runServersScript("start-server", peers[i].dir); err != nil {
			return err
		}
		return waitZKMode(e.Addrs[i], time.Minute, modes...)
	}
	if err := start(0); err != nil {
		return nil, err
	}
	if err := start(1); err != nil {
		return nil, err
	}
	if err := waitZKMode(e.Addrs[0], time.Minute, "leader", "follower"); err != nil {
		return nil, err
	}
	if err := waitZKMode(e.Addrs[1], time.Minute, "leader", "follower"); err != nil {
		return nil, err
	}
	if err := start(2, "follower"); err != nil {
		return nil, err
	}
	return e, nil
}

// Close kills the peers (kill -9: the ensemble is thrown away, and a graceful stop holds each JVM
// a second or more), then stops the proxies and removes the peers' directories.
func (e *ProxiedEnsemble) Close() error {
	var errs []error
	for _, dir := range e.Dirs {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // never started
		}
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("proxied ensemble: %w", err))
		case perr != nil:
			errs = append(errs, fmt.Errorf("proxied ensemble: %s/pid: %w", dir, perr))
		default:
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("proxied ensemble: kill peer %s: %w", dir, err))
			}
		}
	}
	for _, row := range e.links {
		for _, ps := range row {
			for _, p := range ps {
				p.Close()
			}
		}
	}
	if err := os.RemoveAll(e.base); err != nil {
		errs = append(errs, fmt.Errorf("proxied ensemble: %w", err))
	}
	return errors.Join(errs...)
}

// CutOff black-holes the proxied links between peer a and each of others, both ways: connections
// stay open, nothing passes, and neither end learns of the other giving up. The returned func
// heals it.
func (e *ProxiedEnsemble) CutOff(a int, others ...int) (heal func()) {
	var cut []*tcpproxy.Proxy
	for _, o := range others {
		cut = append(cut, e.links[a][o]...)
		cut = append(cut, e.links[o][a]...)
	}
	for _, p := range cut {
		p.Stall()
	}
	return func() {
		for _, p := range cut {
			p.Resume()
		}
	}
}

// Whole reports whether the ensemble serves with all three peers: one leader, two followers.
// A peer started again, or healed of a cut, rejoins some seconds later, on its own.
func (e *ProxiedEnsemble) Whole() bool {
	leaders, followers := 0, 0
	for _, a := range e.Addrs {
		switch ZKMode(a) {
		case "leader":
			leaders++
		case "follower":
			followers++
		}
	}
	return leaders == 1 && followers == 2
}

// ZKLeader is the index of the server in addrs that says it leads, or -1.
func ZKLeader(addrs []string) int {
	for i, a := range addrs {
		if ZKMode(a) == "leader" {
			return i
		}
	}
	return -1
}

// ZKMode is the role the ZooKeeper server at addr gives in its srvr four-letter word ("leader",
// "follower", "standalone"), "unreachable", or "not serving".
func ZKMode(addr string) string {
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
			return strings.TrimSpace(mode)
		}
	}
	return "not serving"
}

// WaitZKMode waits until the server at addr serves in one of the modes, within d.
func WaitZKMode(t testing.TB, addr string, d time.Duration, modes ...string) {
	t.Helper()
	if err := waitZKMode(addr, d, modes...); err != nil {
		t.Fatal(err)
	}
}

// waitZKMode is WaitZKMode's error when the server does not serve in one of the modes within d
// (with no modes given, it returns at once).
func waitZKMode(addr string, d time.Duration, modes ...string) error {
	if len(modes) == 0 {
		return nil
	}
	deadline := time.Now().Add(d)
	last := ZKMode(addr)
	for !slices.Contains(modes, last) {
		if time.Now().After(deadline) {
			return fmt.Errorf("ZooKeeper at %s: mode %q after %v, want one of %v", addr, last, d, modes)
		}
		time.Sleep(100 * time.Millisecond)
		last = ZKMode(addr)
	}
	return nil
}

// ServersScript runs scripts/servers.sh with args (start-server, stop-server of a server
// directory), failing the test when it fails.
func ServersScript(t testing.TB, args ...string) {
	t.Helper()
	if err := runServersScript(args...); err != nil {
		t.Fatal(err)
	}
}

func runServersScript(args ...string) error {
	script, err := scriptPath("servers.sh")
	if err != nil {
		return err
	}
	if out, err := exec.Command(script, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("servers.sh %v: %w\n%s", args, err, out)
	}
	return nil
}

// Script is the repository's scripts/<name> (servers.sh, galera.sh), found from the test's package
// directory upwards (past dlock's own go.mod, to the repository's root).
func Script(t testing.TB, name string) string {
	t.Helper()
	script, err := scriptPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return script
}

func scriptPath(name string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("scripts/%s: %w", name, err)
	}
	for {
		script := filepath.Join(dir, "scripts", name)
		if _, err := os.Stat(script); err == nil {
			return script, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("scripts/%s: not found above the test's directory", name)
		}
		dir = parent
	}
}

// freePort is a port nothing listens on, below Linux's ephemeral range, as scripts/servers.sh
// picks them: a port in that range can be taken by some client's outgoing connection before the
// peer binds it.
func freePort(t testing.TB, taken map[int]bool) int {
	t.Helper()
	p, err := pickPort(taken)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func pickPort(taken map[int]bool) (int, error) {
	for range 200 {
		p := 10000 + rand.IntN(22000)
		if taken[p] {
			continue
		}
		taken[p] = true
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			_ = ln.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free port found")
}

// FreeAddr is a loopback address a test's server may listen on, again after a restart: its port
// is below Linux's ephemeral range, so that no outgoing connection takes it meanwhile.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", freePort(t, map[int]bool{}))
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
