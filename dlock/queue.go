package dlock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

// QueueEntry is one lock node as ZooKeeper holds it now.
type QueueEntry struct {
	Node   string `json:"node"`   // node name under the lock path
	Kind   string `json:"kind"`   // "lock", "read" or "write"
	Seq    int64  `json:"seq"`    // sequence number: the queue order
	Owner  string `json:"owner"`  // the owning client's WithOwner name
	Token  int64  `json:"token"`  // the fencing token the holding has or will have
	Holder bool   `json:"holder"` // holds the lock now (false: waiting)
}

// Queue reads the lock queue at path, in order: who holds the lock and who waits. It is a snapshot
// for people and dashboards, not something to decide on; nodes may come and go while it is read.
// It reads the first limit contenders (every one if limit <= 0), one request each, and says how
// many there were in all.
func (c *Client) Queue(ctx context.Context, path string, limit int) (entries []QueueEntry, total int, err error) {
	if err := validateLockPath(path); err != nil {
		return nil, 0, err
	}
	kids, dir, err := c.children(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return []QueueEntry{}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("dlock: queue %s: %w", path, err)
	}
	queue := nodename.Queue(kids)
	total = len(queue)
	if limit > 0 && len(queue) > limit {
		queue = queue[:limit]
	}
	live := make([]nodename.Node, 0, len(queue))
	out := make([]QueueEntry, 0, len(queue))
	for _, n := range queue {
		node, err := retry(ctx, c, func() (getResult, error) {
			c.stats.gets.Add(1)
			d, st, err := c.conn.Get(path + "/" + n.Name)
			return getResult{d, st}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // released while we read
		}
		if err != nil {
			return nil, 0, fmt.Errorf("dlock: queue %s: %w", path, err)
		}
		live = append(live, n)
		out = append(out, QueueEntry{Node: n.Name, Kind: string(n.Kind), Seq: n.Seq, Owner: string(node.data), Token: fencingToken(dir, n)})
	}
	// Who holds is judged among the nodes still there when read: a holder that released while
	// the queue was being read has handed the lock on.
	for i, n := range live {
		out[i].Holder = len(nodename.Blockers(live, n)) == 0
	}
	return out, total, nil
}

type getResult struct {
	data []byte
	stat *zk.Stat
}

// QueueChanged waits until the queue at path changes (a node joins or leaves, or the path comes or
// goes), or ctx ends: one ZooKeeper watch, for a dashboard that redraws the queue when it moves
// instead of reading it in a loop. It returns nil on a change, and ctx's error otherwise. While the
// path does not exist it watches the nearest parent that does (a creation watch on the path
// itself would stay with the session until someone made it), so it may also wake for a change
// beside the path; the caller reads the queue again either way.
func (c *Client) QueueChanged(ctx context.Context, path string) error {
	if err := validateLockPath(path); err != nil {
		return err
	}
	changed, err := retry(ctx, c, func() (<-chan zk.Event, error) {
		for p := path; ; p = parentOf(p) {
			c.stats.children.Add(1)
			_, _, ch, err := c.conn.ChildrenW(p)
			if !errors.Is(err, zk.ErrNoNode) || p == "/" {
				return ch, err
			}
		}
	})
	if err != nil {
		return fmt.Errorf("dlock: watch queue %s: %w", path, err)
	}
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func parentOf(p string) string {
	i := strings.LastIndex(p, "/")
	if i <= 0 {
		return "/"
	}
	return p[:i]
}
