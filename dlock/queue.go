package dlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

// QueueEntry is one lock node as ZooKeeper holds it now.
type QueueEntry struct {
	Node   string `json:"node"`   // node name under the lock path
	Kind   string `json:"kind"`   // "lock", "read" or "write"
	Seq    int64  `json:"seq"`    // ZooKeeper's sequence number read unsigned (past 2147483647 it goes on, not negative)
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
//
// Callers on one path share one watch. go-zookeeper cannot remove a watch, so a call that gave up
// used to leave its watch, and its channel in go-zookeeper, behind until the queue next moved: a
// page opened and closed again and again on a queue that never moves grew without bound. Now a
// call joins the watch already pending on its path, if any, and only the first sets one; all of
// them wake when it fires. A call that joins a watch set a moment before it may wake for a change
// made just before it called: early, never late.
func (c *Client) QueueChanged(ctx context.Context, path string) error {
	if err := validateLockPath(path); err != nil {
		return err
	}
	w := c.queueWatch(path)
	select {
	case <-w.set:
	case <-ctx.Done():
		return ctx.Err()
	}
	if w.err != nil {
		return fmt.Errorf("dlock: watch queue %s: %w", path, w.err)
	}
	select {
	case <-w.fired:
		if w.closed {
			return fmt.Errorf("dlock: watch queue %s: %w", path, ErrClosed)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// queueWatch is the one children watch pending on a lock path for a client, shared by every
// QueueChanged call on it.
type queueWatch struct {
	set    chan struct{} // closed once the watch is set, or setting it failed
	err    error         // why it failed; written before set is closed
	fired  chan struct{} // closed when the watch fires or the client closes
	closed bool          // the client closed; written before fired is closed
}

type queueWatchKey struct {
	c    *Client
	path string
}

// queueWatches are the pending queue watches of every client. They live beside Client rather than
// in it, keyed by it, and an entry goes as soon as its watch fires, fails or its client closes,
// so a closed client leaves nothing here.
var queueWatches = struct {
	sync.Mutex
	m map[queueWatchKey]*queueWatch
}{m: map[queueWatchKey]*queueWatch{}}

// queueWatch returns the watch pending on path, setting one if there is none. The watch is set
// and awaited on a goroutine of its own, not the caller's, because the caller may leave at any
// moment and the others still need it: one goroutine per watched path, for as long as its
// ZooKeeper watch is pending.
func (c *Client) queueWatch(path string) *queueWatch {
	k := queueWatchKey{c, path}
	queueWatches.Lock()
	defer queueWatches.Unlock()
	if w, ok := queueWatches.m[k]; ok {
		return w
	}
	w := &queueWatch{set: make(chan struct{}), fired: make(chan struct{})}
	queueWatches.m[k] = w
	go c.runQueueWatch(k, w)
	return w
}

func (c *Client) runQueueWatch(k queueWatchKey, w *queueWatch) {
	forget := func() {
		queueWatches.Lock()
		if queueWatches.m[k] == w {
			delete(queueWatches.m, k)
		}
		queueWatches.Unlock()
	}
	// bgCtx ends with the client; until then the watch is set once a session is there, whoever
	// still waits for it.
	changed, err := retry(c.bgCtx, c, func() (<-chan zk.Event, error) {
		for p := k.path; ; p = parentOf(p) {
			c.stats.children.Add(1)
			_, _, ch, err := c.conn.ChildrenW(p)
			if errors.Is(err, zk.ErrNoNode) && p != "/" {
				if p == k.path && queueWatchGap != nil {
					queueWatchGap(k.path)
				}
				continue
			}
			if err != nil || p == k.path {
				return ch, err
			}
			// An ancestor's watch, set after the path was found missing: the path may have been
			// created in between, a change that watch never sees. Look once more.
			c.stats.exists.Add(1)
			there, _, err := c.conn.Exists(k.path)
			if err != nil || !there {
				return ch, err
			}
			now := make(chan zk.Event, 1)
			now <- zk.Event{Type: zk.EventNodeCreated, Path: k.path}
			return now, nil
		}
	})
	if err != nil {
		forget() // before the callers hear of it, so that the next call tries again
		w.err = err
		close(w.set)
		return
	}
	close(w.set)
	select {
	case <-changed:
	case <-c.closedCh:
		w.closed = true
	}
	forget()
	close(w.fired)
}

// queueWatchGap, when set (tests only), runs where the path was found missing, before an
// ancestor's watch is set.
var queueWatchGap func(path string)

func parentOf(p string) string {
	i := strings.LastIndex(p, "/")
	if i <= 0 {
		return "/"
	}
	return p[:i]
}
