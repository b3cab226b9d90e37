// Package protected finds a lock node by its protected name after a create whose reply was lost
// (Curator's protected mode, ZOOKEEPER-1262): the one rule dlock and its teaching recipes share.
// A protected name carries a GUID unique to one lock attempt (nodename.Layout.Base), so the
// attempt can tell its node from everyone else's when it cannot know whether its create was
// applied.
package protected

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock/internal/nodename"
)

// ConnectionError reports the errors after which a request may or may not have been applied:
// the connection or the session went away before its reply came.
func ConnectionError(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.Is(err, zk.ErrClosing)
}

// Requests are the ZooKeeper calls Find makes, through the caller's client: each waits for a
// session and repeats itself after a connection error, as that client does, until ctx ends.
type Requests struct {
	Sync     func(ctx context.Context, path string) error
	Children func(ctx context.Context, path string) ([]string, error)
	Exists   func(ctx context.Context, path string) (*zk.Stat, error) // zk.ErrNoNode when absent
	// Session is the client's session ID, read once the children are listed.
	Session func() int64
}

// Find looks under dir for the node an attempt created with the protected name base: its path
// and owning session, or "" when there is none (the create was not applied). It syncs first:
// after a reconnection the client may talk to a follower that has not yet applied the create
// whose reply was lost, and a search there would miss the node and leave it as a second,
// orphaned one. A node with the name but owned by an earlier session is not the caller's to use
// (CURATOR-498): it is on its way out with that session; Find passes each to foreign, if given,
// and goes on.
func Find(ctx context.Context, r Requests, dir, base string, foreign func(path string, owner, session int64)) (string, int64, error) {
	if err := r.Sync(ctx, dir); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return "", 0, fmt.Errorf("look for own lock node: sync: %w", err)
	}
	kids, err := r.Children(ctx, dir)
	if errors.Is(err, zk.ErrNoNode) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("look for own lock node: %w", err)
	}
	sid := r.Session()
	for _, name := range kids {
		if n, ok := nodename.Parse(name); !ok || n.Base != base {
			continue
		}
		p := dir + "/" + name
		st, err := r.Exists(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return "", 0, fmt.Errorf("look for own lock node: %w", err)
		}
		if st.EphemeralOwner == sid {
			return p, sid, nil
		}
		if foreign != nil {
			foreign(p, st.EphemeralOwner, sid)
		}
	}
	return "", 0, nil
}
