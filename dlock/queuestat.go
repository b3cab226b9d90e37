package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// QueueStat is a lock queue's size, and how often it has moved, as one read of ZooKeeper sees them.
type QueueStat struct {
	// Contenders is how many nodes the queue holds: its holders and its waiters.
	Contenders int
	// Moves counts the nodes that joined or left the queue since its path was made (ZooKeeper's
	// children version). It wraps around at 2^32: subtract two readings as uint32. Between two
	// readings, (moves - change in Contenders) / 2 nodes left the queue.
	Moves uint32
}

// QueueStat reads the size of the lock queue at path in one request, with no watch: cheap enough
// to read before deciding whether to join the queue. Two readings some time apart tell how fast
// the queue moves. A path that does not exist holds no one. Like Queue, it is a snapshot: nodes
// may come and go as soon as it is read.
func (c *Client) QueueStat(ctx context.Context, path string) (QueueStat, error) {
	if err := validateLockPath(path); err != nil {
		return QueueStat{}, err
	}
	st, err := c.exists(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return QueueStat{}, nil
	}
	if err != nil {
		return QueueStat{}, fmt.Errorf("dlock: queue stat %s: %w", path, err)
	}
	return QueueStat{Contenders: int(st.NumChildren), Moves: uint32(st.Cversion)}, nil
}
