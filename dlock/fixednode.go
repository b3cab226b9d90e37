package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// The two teaching variants that fight over one fixed node: whoever creates <path>/lock holds the
// lock. They differ only in how losers wait.

const fixedNodeName = "lock"

// tryFixed creates the fixed ephemeral node once. held is false, with no error, when someone else
// has it.
func (c *Client) tryFixed(ctx context.Context, dir string) (lease *Lease, held bool, err error) {
	if err := validateLockPath(dir); err != nil {
		return nil, false, err
	}
	p := dir + "/" + fixedNodeName
	for {
		gen, err := c.session(ctx)
		if err != nil {
			return nil, false, err
		}
		_, err = call(ctx, c, func() (string, error) {
			c.stats.creates.Add(1)
			return c.conn.Create(p, []byte(c.cfg.owner), zk.FlagEphemeral, c.cfg.acl)
		})
		switch {
		case err == nil:
		case ctx.Err() != nil:
			// The create may still be applied; requests of a session run in order, so a check
			// sent after it sees it, and removes it if it is ours.
			c.background(func() {
				if st, err := c.exists(c.bgCtx, p); err == nil && st.EphemeralOwner == gen.sessionID {
					_, _ = c.removeNow(c.bgCtx, p, gen.sessionID)
				}
			})
			return nil, false, ctx.Err()
		case errors.Is(err, zk.ErrNodeExists):
			// After a lost reply it may be our own node: check its owner.
			st, serr := c.exists(ctx, p)
			if serr != nil || st.EphemeralOwner != gen.sessionID {
				return nil, false, nil
			}
		case errors.Is(err, zk.ErrNoNode):
			if err := c.ensureParents(ctx, dir); err != nil {
				return nil, false, err
			}
			continue
		case isConnectionError(err):
			continue // the create may have been applied: the next try finds out
		default:
			return nil, false, fmt.Errorf("create %s: %w", p, err)
		}
		n := &ownNode{dir: dir, path: p, owner: gen.sessionID}
		if err := c.watchOwn(ctx, n); err != nil {
			if !errors.Is(err, zk.ErrNoNode) {
				c.discard(ctx, p, n.owner)
			}
			return nil, false, err
		}
		l, err := c.grant(n)
		if err != nil {
			c.discard(ctx, p, n.owner)
			return nil, false, err
		}
		c.stats.acquisitions.Add(1)
		return l, true, nil
	}
}
