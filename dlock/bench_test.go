package dlock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// BenchmarkMutex acquires and releases one lock from 1, 3 and 30 contenders, each with its own
// ZooKeeper session, with dlock and, in the same run and against the same ZooKeeper, with
// go-zookeeper's zk.Lock, Apache Curator's InterProcessMutex (Java, warmed up before timing) and
// kazoo's Lock (Debian's python3).
//
//	make bench   (go -C dlock test -run '^$' -bench Mutex -benchtime 3000x ., in rounds)
func BenchmarkMutex(b *testing.B) {
	for _, contenders := range []int{1, 3, 30} {
		b.Run(fmt.Sprintf("impl=dlock/contenders=%d", contenders), func(b *testing.B) {
			benchDlock(b, contenders)
		})
		b.Run(fmt.Sprintf("impl=zklock/contenders=%d", contenders), func(b *testing.B) {
			benchZKLock(b, contenders)
		})
		b.Run(fmt.Sprintf("impl=curator/contenders=%d", contenders), func(b *testing.B) {
			benchPeer(b, libCurator, contenders)
		})
		b.Run(fmt.Sprintf("impl=kazoo/contenders=%d", contenders), func(b *testing.B) {
			benchPeer(b, libKazoo, contenders)
		})
	}
}

// benchPeer runs a peer library's bench program (testdata/peers), which sets its sessions up and
// warms up, then times b.N rounds when told to start.
func benchPeer(b *testing.B, lib string, contenders int) {
	b.StopTimer()
	args := []string{strings.Join(testenv.ZKServers(b), ","), testenv.UniquePath(b), strconv.Itoa(contenders), strconv.Itoa(b.N)}
	var cmd *exec.Cmd
	if lib == libCurator {
		cmd = exec.Command("java", append([]string{"-Xmx256m", "-cp", curatorClasspath(b), "CuratorBench"}, args...)...)
	} else {
		requireKazoo(b)
		cmd = exec.Command(debianPython, append([]string{"testdata/peers/kazoo_bench.py"}, args...)...)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "READY" {
		b.Fatalf("%s bench did not get ready: %q\n%s", lib, sc.Text(), stderr.String())
	}
	b.StartTimer()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		b.Fatal(err)
	}
	var nanos int64
	if !sc.Scan() {
		b.Fatalf("%s bench ended early\n%s", lib, stderr.String())
	}
	b.StopTimer()
	if _, err := fmt.Sscanf(sc.Text(), "DONE %d", &nanos); err != nil {
		b.Fatalf("%s bench: %q: %v\n%s", lib, sc.Text(), err, stderr.String())
	}
	b.ReportMetric(float64(b.N)/(float64(nanos)/1e9), "acq/s")
}

// contend runs b.N lock/unlock rounds spread over the contenders and reports acquisitions/s.
func contend(b *testing.B, contenders int, round []func() error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < contenders; i++ {
		wg.Add(1)
		go func(f func() error) {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := f(); err != nil {
					b.Error(err)
					return
				}
			}
		}(round[i])
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq/s")
}

func benchDlock(b *testing.B, contenders int) {
	servers := testenv.ZKServers(b)
	path := testenv.UniquePath(b)
	var clients []*dlock.Client
	var rounds []func() error
	for i := 0; i < contenders; i++ {
		c := connect(b, servers)
		clients = append(clients, c)
		m := dlock.NewMutex(c, path)
		rounds = append(rounds, func() error {
			l, err := m.Lock(context.Background())
			if err != nil {
				return err
			}
			return l.Unlock(context.Background())
		})
	}
	contend(b, contenders, rounds)
	var s dlock.Stats
	for _, c := range clients {
		s = s.Add(c.Stats())
	}
	n := float64(s.Acquisitions)
	b.ReportMetric(float64(s.WatchEvents)/n, "wakeups/acq")
	b.ReportMetric(float64(s.Ops())/n, "zkops/acq")
	b.ReportMetric(float64(s.RoundTrips())/n, "roundtrips/acq")
}

func benchZKLock(b *testing.B, contenders int) {
	servers := testenv.ZKServers(b)
	path := testenv.UniquePath(b)
	var rounds []func() error
	for i := 0; i < contenders; i++ {
		conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(conn.Close)
		l := zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))
		rounds = append(rounds, func() error {
			if err := l.Lock(); err != nil {
				return err
			}
			return l.Unlock()
		})
	}
	contend(b, contenders, rounds)
}
