package dlock_test

// The harness for the tests against real peer libraries. Every peer is a process of its own:
// Apache Curator (Java, Debian's libcurator-recipes-java, compiled here with javac), kazoo
// (Debian's python3-kazoo under /usr/bin/python3), and this test binary run again as a dlock or a
// go-zookeeper zk.Lock worker. All of them run the same critical section on files in one
// directory (testdata/peers/CuratorWorker.java says what it does), so that two holders at once
// show as an overlap and a lost update as a short counter, whichever libraries they were.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// Libraries a peer process can be.
const (
	libDlock      = "dlock"       // dlock, Curator naming
	libDlockKazoo = "dlock-kazoo" // dlock, kazoo naming
	libZKLock     = "zklock"      // go-zookeeper's zk.Lock
	libCurator    = "curator"
	libKazoo      = "kazoo"
)

const peerWorkerEnv = "DLOCK_PEER_WORKER"

// peerKind is what a peer takes: "mutex", "read" or "write".
type peerSpec struct {
	lib, kind string
}

func (p peerSpec) String() string { return p.lib + "/" + p.kind }

// fleetDir is the shared state of one test's peers: the writer marker, the readers' markers, the
// counter and the order in which writers held, and the start signal "go". With barrier, peers
// wait for release(); without, they start as soon as they are connected.
func fleetDir(t *testing.T, barrier bool) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Mkdir(filepath.Join(d, "readers"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "counter"), []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !barrier {
		release(t, d)
	}
	return d
}

// release lets the peers of dir start.
func release(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

type peerProc struct {
	spec   peerSpec
	id     string
	cmd    *exec.Cmd
	ready  chan struct{} // closed when the peer is connected and waits for "go"
	held   chan int      // each acquisition's index as the peer reports it
	result chan peerResult
	stderr *strings.Builder
}

type peerResult struct {
	acquired, overlaps int
	err                error
}

// peerAuthEnv names the digest identity user:password a peer authenticates as, giving its nodes
// dlock.DigestACL (Curator: authorization and an ACLProvider; kazoo: auth_data and default_acl);
// without it a peer's nodes are open to all.
const peerAuthEnv = "PEER_ZK_AUTH"

// startPeer runs one peer process: n acquisitions of spec at path, each held for hold, with env
// added to its environment (peerAuthEnv).
func startPeer(t *testing.T, spec peerSpec, path, dir, id string, n int, hold time.Duration, env ...string) *peerProc {
	t.Helper()
	args := []string{strings.Join(testenv.ZKServers(t), ","), path, spec.kind, strconv.Itoa(n), id, dir,
		strconv.FormatInt(hold.Milliseconds(), 10)}
	var cmd *exec.Cmd
	switch spec.lib {
	case libCurator:
		cmd = exec.Command("java", append([]string{"-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-cp", curatorClasspath(t), "CuratorWorker"}, args...)...)
	case libKazoo:
		requireKazoo(t)
		cmd = exec.Command(debianPython, append([]string{"testdata/peers/kazoo_worker.py"}, args...)...)
	case libDlock, libDlockKazoo, libZKLock:
		cmd = exec.Command(os.Args[0], append([]string{spec.lib}, args...)...)
		cmd.Env = append(os.Environ(), peerWorkerEnv+"=1")
	default:
		t.Fatalf("unknown peer library %q", spec.lib)
	}
	cmd.Env = append(cmd.Environ(), env...)
	p := &peerProc{spec: spec, id: id, cmd: cmd, ready: make(chan struct{}), held: make(chan int, n), result: make(chan peerResult, 1), stderr: &strings.Builder{}}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s peer: %v", spec, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go p.read(out)
	return p
}

func (p *peerProc) read(out io.Reader) {
	res := peerResult{acquired: -1}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if line == "READY" {
			close(p.ready)
		}
		if i, ok := strings.CutPrefix(line, "HELD "); ok {
			n, _ := strconv.Atoi(i)
			p.held <- n
		}
		if _, err := fmt.Sscanf(line, "RESULT acquired=%d overlaps=%d", &res.acquired, &res.overlaps); err == nil {
			continue
		}
	}
	if err := p.cmd.Wait(); err != nil {
		res.err = fmt.Errorf("%s peer %s: %w\n%s", p.spec, p.id, err, p.stderr.String())
	} else if res.acquired < 0 {
		res.err = fmt.Errorf("%s peer %s printed no result\n%s", p.spec, p.id, p.stderr.String())
	}
	p.result <- res
}

// wait is the peer's result once it exits, or a failure after timeout.
func (p *peerProc) wait(t *testing.T, timeout time.Duration) peerResult {
	t.Helper()
	select {
	case r := <-p.result:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		t.Fatalf("%s peer %s did not finish within %v", p.spec, p.id, timeout)
		return peerResult{}
	}
}

// waitReady waits until the peer is connected and waits for "go".
func (p *peerProc) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.ready:
	case r := <-p.result:
		t.Fatalf("%s peer %s ended before it was ready: %v", p.spec, p.id, r.err)
	case <-time.After(timeout):
		t.Fatalf("%s peer %s was not ready within %v", p.spec, p.id, timeout)
	}
}

// waitHeld waits until the peer reports holding the lock.
func (p *peerProc) waitHeld(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.held:
	case r := <-p.result:
		t.Fatalf("%s peer %s ended before holding: %v", p.spec, p.id, r.err)
	case <-time.After(timeout):
		t.Fatalf("%s peer %s did not hold the lock within %v", p.spec, p.id, timeout)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// readFleet is the counter and the writers' order after a run.
func readFleet(t *testing.T, dir string) (counter int, order []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "counter"))
	if err != nil {
		t.Fatal(err)
	}
	counter, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if b, err = os.ReadFile(filepath.Join(dir, "order")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return counter, strings.Fields(string(b))
}

// The peers' prerequisites: missing ones fail under CI=true and skip elsewhere.

const debianPython = "/usr/bin/python3" // another python3 on PATH lacks Debian's kazoo

func missingPeer(t testing.TB, what string) {
	t.Helper()
	msg := what + ": run `make test`, which installs it (scripts/servers.sh)"
	if testenv.InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

var kazooOnce = sync.OnceValue(func() error {
	return exec.Command(debianPython, "-c", "import kazoo").Run()
})

func requireKazoo(t testing.TB) {
	if err := kazooOnce(); err != nil {
		missingPeer(t, "kazoo (Debian python3-kazoo) not importable by "+debianPython)
	}
}

// curatorJars are the Debian jars the Curator worker needs at compile and run time.
var curatorJars = []string{"curator-client", "curator-framework", "curator-recipes", "zookeeper", "zookeeper-jute",
	"guava", "slf4j-api", "slf4j-nop"}

var curatorBuild struct {
	once sync.Once
	cp   string
	err  error
}

// curatorClasspath compiles the Curator worker and bench once per test binary, against
// /usr/share/java.
func curatorClasspath(t testing.TB) string {
	t.Helper()
	curatorBuild.once.Do(func() {
		var jars []string
		for _, j := range curatorJars {
			p := "/usr/share/java/" + j + ".jar"
			if _, err := os.Stat(p); err != nil {
				curatorBuild.err = fmt.Errorf("%s missing (Debian libcurator-recipes-java)", p)
				return
			}
			jars = append(jars, p)
		}
		if _, err := exec.LookPath("javac"); err != nil {
			curatorBuild.err = errors.New("javac missing (Debian default-jdk-headless)")
			return
		}
		out := filepath.Join(os.TempDir(), "dlock-curator-worker-"+strconv.Itoa(os.Getpid()))
		cp := strings.Join(jars, ":")
		if b, err := exec.Command("javac", "-d", out, "-cp", cp, "testdata/peers/CuratorWorker.java", "testdata/peers/CuratorBench.java").CombinedOutput(); err != nil {
			curatorBuild.err = fmt.Errorf("javac: %v\n%s", err, b)
			return
		}
		peerCleanups = append(peerCleanups, func() { _ = os.RemoveAll(out) })
		curatorBuild.cp = out + ":" + cp
	})
	if curatorBuild.err != nil {
		missingPeer(t, "Curator worker: "+curatorBuild.err.Error())
	}
	return curatorBuild.cp
}

// peerCleanups run when the test binary ends.
var peerCleanups []func()

// runPeerWorker is this binary run as a dlock or zk.Lock peer: LIB SERVERS PATH KIND N ID DIR HOLD_MS.
func runPeerWorker(args []string) int {
	if len(args) != 8 {
		fmt.Fprintln(os.Stderr, "usage: LIB SERVERS PATH KIND N ID DIR HOLD_MS")
		return 2
	}
	lib, servers, path, kind, id, dir := args[0], strings.Split(args[1], ","), args[2], args[3], args[5], args[6]
	n, _ := strconv.Atoi(args[4])
	holdMS, _ := strconv.Atoi(args[7])
	hold := time.Duration(holdMS) * time.Millisecond
	ctx := context.Background()
	auth := os.Getenv(peerAuthEnv)
	user, password, _ := strings.Cut(auth, ":")

	var lock func() (unlock func() error, err error)
	switch lib {
	case libZKLock:
		conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer conn.Close()
		acl := zk.WorldACL(zk.PermAll)
		if auth != "" {
			if err := conn.AddAuth("digest", []byte(auth)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			acl = dlock.DigestACL(user, password)
		}
		l := zk.NewLock(conn, path, acl)
		lock = func() (func() error, error) { return l.Unlock, l.Lock() }
	default:
		naming := dlock.CuratorNaming
		if lib == libDlockKazoo {
			naming = dlock.KazooNaming
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		opts := []dlock.Option{dlock.WithNaming(naming), dlock.WithOwner(id)}
		if auth != "" {
			opts = append(opts, dlock.WithDigest(user, password))
		}
		c, err := dlock.Connect(cctx, servers, opts...)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Close()
		take := dlock.NewMutex(c, path).Lock
		switch kind {
		case "read":
			take = dlock.NewRWMutex(c, path).RLock
		case "write":
			take = dlock.NewRWMutex(c, path).Lock
		}
		lock = func() (func() error, error) {
			l, err := take(ctx)
			if err != nil {
				return nil, err
			}
			return func() error { return l.Unlock(ctx) }, nil
		}
	}
	fmt.Println("READY")
	for {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	overlaps := 0
	for i := range n {
		unlock, err := lock()
		if err != nil {
			fmt.Fprintln(os.Stderr, "lock:", err)
			return 1
		}
		fmt.Printf("HELD %d\n", i)
		o, err := peerSection(kind, dir, id, i, hold)
		if err != nil {
			fmt.Fprintln(os.Stderr, "critical section:", err)
			return 1
		}
		overlaps += o
		if err := unlock(); err != nil {
			fmt.Fprintln(os.Stderr, "unlock:", err)
			return 1
		}
	}
	fmt.Printf("RESULT acquired=%d overlaps=%d\n", n, overlaps)
	return 0
}

// peerSection is CuratorWorker.section in Go.
func peerSection(kind, dir, id string, i int, hold time.Duration) (overlaps int, err error) {
	if kind == "read" {
		me := filepath.Join(dir, "readers", fmt.Sprintf("%s-%d", id, i))
		f, err := os.OpenFile(me, os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return 0, err
		}
		_ = f.Close()
		if _, err := os.Stat(filepath.Join(dir, "writer")); err == nil {
			overlaps++
		}
		time.Sleep(hold)
		return overlaps, os.Remove(me)
	}
	w := filepath.Join(dir, "writer")
	mine := true
	f, err := os.OpenFile(w, os.O_CREATE|os.O_EXCL, 0o644)
	switch {
	case errors.Is(err, os.ErrExist):
		overlaps++
		mine = false
	case err != nil:
		return 0, err
	default:
		_ = f.Close()
	}
	if readers, err := os.ReadDir(filepath.Join(dir, "readers")); err != nil {
		return 0, err
	} else if len(readers) > 0 {
		overlaps++
	}
	b, err := os.ReadFile(filepath.Join(dir, "counter"))
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, err
	}
	time.Sleep(hold)
	tmp := filepath.Join(dir, "counter."+id)
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(v+1)), 0o644); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "counter")); err != nil {
		return 0, err
	}
	of, err := os.OpenFile(filepath.Join(dir, "order"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	if _, err := fmt.Fprintln(of, id); err != nil {
		return 0, err
	}
	if err := of.Close(); err != nil {
		return 0, err
	}
	if mine {
		err = os.Remove(w)
	}
	return overlaps, err
}
