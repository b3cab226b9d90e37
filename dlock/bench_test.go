package dlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/internal/testenv"
)

// BenchmarkMutex acquires and releases one lock from 1, 3 and 30 contenders, each with its own
// ZooKeeper session, with dlock and, in the same run, with go-zookeeper's zk.Lock.
//
//	make bench   (go test -run '^$' -bench Mutex -benchtime 3000x ./dlock)
func BenchmarkMutex(b *testing.B) {
	for _, contenders := range []int{1, 3, 30} {
		b.Run(fmt.Sprintf("impl=dlock/contenders=%d", contenders), func(b *testing.B) {
			benchDlock(b, contenders)
		})
		b.Run(fmt.Sprintf("impl=zklock/contenders=%d", contenders), func(b *testing.B) {
			benchZKLock(b, contenders)
		})
	}
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
		cs := c.Stats()
		s.WatchEvents += cs.WatchEvents
		s.Acquisitions += cs.Acquisitions
		s.Creates += cs.Creates
		s.Deletes += cs.Deletes
		s.ChildrenCalls += cs.ChildrenCalls
		s.ExistsCalls += cs.ExistsCalls
		s.GetCalls += cs.GetCalls
	}
	n := float64(s.Acquisitions)
	b.ReportMetric(float64(s.WatchEvents)/n, "wakeups/acq")
	b.ReportMetric(float64(s.Creates+s.Deletes+s.ChildrenCalls+s.ExistsCalls+s.GetCalls)/n, "zkops/acq")
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
