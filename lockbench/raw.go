package lockbench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// RawZooKeeper measures ZooKeeper alone, with no lock around it: sessions clients, each with
// workers requests in flight, create an ephemeral sequential node under path and delete it again,
// for d. It returns the create+delete pairs per second: the ceiling of lock acquisitions per
// second on these servers, since every acquisition creates and deletes one node (and reads more).
func RawZooKeeper(ctx context.Context, servers []string, sessions, workers int, path string, d time.Duration) (float64, error) {
	conns := make([]*zk.Conn, sessions)
	for i := range conns {
		conn, events, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
		if err != nil {
			return 0, fmt.Errorf("lockbench: raw: connect: %w", err)
		}
		defer conn.Close()
		if err := waitConnected(ctx, events); err != nil {
			return 0, err
		}
		conns[i] = conn
	}
	if _, err := conns[0].Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
		return 0, fmt.Errorf("lockbench: raw: create %s: %w", path, err)
	}
	defer func() { _ = conns[0].Delete(path, -1) }()
	var pairs atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for _, conn := range conns {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(conn *zk.Conn) {
				defer wg.Done()
				for time.Now().Before(stop) && ctx.Err() == nil {
					name, err := conn.Create(path+"/n-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
					if err == nil {
						err = conn.Delete(name, -1)
					}
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					pairs.Add(1)
				}
			}(conn)
		}
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, fmt.Errorf("lockbench: raw: %w", err)
	}
	return float64(pairs.Load()) / d.Seconds(), nil
}

func waitConnected(ctx context.Context, events <-chan zk.Event) error {
	timeout := time.After(15 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("lockbench: raw: no session within 15 s")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
