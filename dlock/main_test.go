package dlock_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(peerWorkerEnv) != "" {
		os.Exit(runPeerWorker(os.Args[1:]))
	}
	testenv.Require("ZK_SERVERS")
	code := m.Run()
	for _, f := range peerCleanups {
		f()
	}
	os.Exit(code)
}

func testLogger() *slog.Logger {
	if os.Getenv("DLOCK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// connect opens a dlock client that the test closes when it ends.
func connect(t testing.TB, servers []string, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := dlock.Connect(ctx, servers, append([]dlock.Option{dlock.WithLogger(testLogger())}, opts...)...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rawConn is a plain go-zookeeper connection that checks what ZooKeeper really holds.
func rawConn(t testing.TB) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(testenv.ZKServers(t), 10*time.Second, zk.WithLogInfo(false),
		zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatalf("zk connect: %v", err)
	}
	t.Cleanup(conn.Close)
	return conn
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// lockNodes lists the children of path (none if it does not exist).
func lockNodes(t testing.TB, conn *zk.Conn, path string) []string {
	t.Helper()
	kids, _, err := conn.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("children %s: %v", path, err)
	}
	slices.Sort(kids)
	return kids
}

// eventually polls cond until it holds or the timeout passes.
var eventually = testenv.Eventually

func waitNodes(t testing.TB, conn *zk.Conn, path string, n int) {
	t.Helper()
	eventually(t, 15*time.Second, "lock nodes to number "+strconv.Itoa(n), func() bool { return len(lockNodes(t, conn, path)) == n })
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// exclusion catches two holders at once: enter fails the test if anyone else is inside.
type exclusion struct {
	inside   atomic.Int32
	overlaps atomic.Int32
}

func (e *exclusion) enter() {
	if e.inside.Add(1) != 1 {
		e.overlaps.Add(1)
	}
}

func (e *exclusion) leave() { e.inside.Add(-1) }

// orderLog records the order in which waiters got the lock.
type orderLog struct {
	mu    sync.Mutex
	order []int
}

func (o *orderLog) add(i int) {
	o.mu.Lock()
	o.order = append(o.order, i)
	o.mu.Unlock()
}

func (o *orderLog) get() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.order)
}

func mustUnlock(t testing.TB, l *dlock.Lease) {
	t.Helper()
	if err := l.Unlock(context.Background()); err != nil {
		t.Errorf("unlock %s: %v", l.Node(), err)
	}
}

// lockAnswer is what a Lock started in the background answered.
type lockAnswer struct {
	lease *dlock.Lease
	err   error
}

// lockBehind starts m.Lock (with timeout) in the background, waits until its node joins the
// queue at path as the nodes-th node, and fails the test if Lock returns within wait: the lock is
// held, so it must still be waiting. The channel gives its answer once the holder lets go.
func lockBehind(t *testing.T, m *dlock.Mutex, timeout time.Duration, raw *zk.Conn, path string, nodes int, wait time.Duration) <-chan lockAnswer {
	t.Helper()
	got := make(chan lockAnswer, 1)
	go func() {
		lease, err := m.Lock(ctxTimeout(t, timeout))
		got <- lockAnswer{lease, err}
	}()
	waitNodes(t, raw, path, nodes)
	select {
	case a := <-got:
		t.Fatalf("Lock returned while the lock was held: %v", a.err)
	case <-time.After(wait):
	}
	return got
}
