package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
)

// memberRecord is what a member node says of its member, as JSON.
type memberRecord struct {
	Modes   []string `json:"modes"`          // what it can run
	Mode    string   `json:"mode,omitempty"` // what it runs: the mode read under its hold
	Version int32    `json:"version"`        // that mode's version
	Serving bool     `json:"serving"`        // it admits work
	Why     string   `json:"why,omitempty"`  // why it does not, when it does not
}

// MemberInfo is one member as ZooKeeper holds it now.
type MemberInfo struct {
	ID string `json:"id"`
	memberRecord
}

// The fleet's nodes under its root.
const (
	modeNode    = "/mode"    // the mode, its version the count of switches
	membersNode = "/members" // a node per member
	barrierNode = "/barrier" // the switch barrier's read/write lock
)

// Nodes are the persistent nodes of the fleet at root, root first: those an operator, or a
// start-up that gives nodes made before another ACL, must look at (the members' nodes and the
// barrier's are ephemeral, of their sessions).
func Nodes(root string) []string {
	return []string{root, root + modeNode, root + membersNode, root + barrierNode}
}

// ensurePath creates p and its parents as persistent nodes with acl where missing: the fleet's
// mode must outlive its members, so these are not containers.
func ensurePath(conn *zk.Conn, p string, acl []zk.ACL) error {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		sub := "/" + strings.Join(parts[:i+1], "/")
		if _, err := conn.Create(sub, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", sub, err)
		}
	}
	return nil
}

// register writes this member's node: created in this session, or overwritten if it already is
// this session's. A node of the same id left by another session (this member's previous life,
// killed and started again) is deleted first: the barrier's hold, not the member node, is what
// keeps the fleet safe, and the node only says who is there.
func (m *Member) register(ctx context.Context, rec memberRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("fleet: member record: %w", err)
	}
	_, err = dlock.Do(ctx, m.c, func(conn *zk.Conn) (struct{}, error) {
		for range 3 {
			_, st, err := conn.Get(m.ownPath())
			switch {
			case errors.Is(err, zk.ErrNoNode):
				if err := ensurePath(conn, m.membersPath(), m.c.ACL()); err != nil {
					return struct{}{}, err
				}
				_, err := conn.Create(m.ownPath(), data, zk.FlagEphemeral, m.c.ACL())
				if errors.Is(err, zk.ErrNodeExists) {
					continue
				}
				return struct{}{}, err
			case err != nil:
				return struct{}{}, err
			case st.EphemeralOwner == conn.SessionID():
				_, err := conn.Set(m.ownPath(), data, st.Version)
				if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
					continue
				}
				return struct{}{}, err
			default:
				m.log.Warn("fleet: a member node of this id belongs to another session; replacing it", "owner", st.EphemeralOwner)
				if err := conn.Delete(m.ownPath(), st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
					return struct{}{}, err
				}
			}
		}
		return struct{}{}, errors.New("the member node kept changing")
	})
	if err != nil {
		return fmt.Errorf("fleet: register %s: %w", m.ownPath(), err)
	}
	return nil
}

// readMode reads the mode, and with watch set, watches its node; a fleet without one gets the
// seed first. Read under a hold of the barrier, it is the mode until the hold is let go: only a
// writer of the barrier changes it.
func (m *Member) readMode(ctx context.Context, watch bool) (Mode, <-chan zk.Event, error) {
	type got struct {
		mode Mode
		ch   <-chan zk.Event
	}
	g, err := dlock.Do(ctx, m.c, func(conn *zk.Conn) (got, error) {
		for range 2 {
			var (
				data []byte
				st   *zk.Stat
				ch   <-chan zk.Event
				err  error
			)
			if watch {
				data, st, ch, err = conn.GetW(m.modePath())
			} else {
				data, st, err = conn.Get(m.modePath())
			}
			if errors.Is(err, zk.ErrNoNode) {
				if err := ensurePath(conn, m.cfg.Root, m.c.ACL()); err != nil {
					return got{}, err
				}
				if _, err := conn.Create(m.modePath(), []byte(m.cfg.Seed), 0, m.c.ACL()); err != nil && !errors.Is(err, zk.ErrNodeExists) {
					return got{}, err
				}
				m.log.Info("fleet: seeded the fleet's mode", "mode", m.cfg.Seed)
				continue
			}
			if err != nil {
				return got{}, err
			}
			return got{Mode{Name: string(data), Version: st.Version}, ch}, nil
		}
		return got{}, errors.New("the mode node came and went")
	})
	if err != nil {
		return Mode{}, nil, fmt.Errorf("fleet: read %s: %w", m.modePath(), err)
	}
	if m.cfg.Seed != g.mode.Name {
		m.log.Debug("fleet: the fleet's mode is not this member's seed; the fleet's runs", "fleet_mode", g.mode.Name, "seed", m.cfg.Seed)
	}
	return g.mode, g.ch, nil
}

// Current reads the fleet's mode from ZooKeeper now, after a sync, so that it is at least as new
// as any switch that had finished when Current was called.
func (m *Member) Current(ctx context.Context) (Mode, error) {
	if _, err := dlock.Do(ctx, m.c, func(conn *zk.Conn) (string, error) { return conn.Sync(m.cfg.Root) }); err != nil &&
		!errors.Is(err, zk.ErrNoNode) {
		return Mode{}, fmt.Errorf("fleet: sync: %w", err)
	}
	mode, _, err := m.readMode(ctx, false)
	return mode, err
}

// Members lists the fleet's members as their nodes say now, by id.
func (m *Member) Members(ctx context.Context) ([]MemberInfo, error) {
	ids, err := dlock.Do(ctx, m.c, func(conn *zk.Conn) ([]string, error) {
		ids, _, err := conn.Children(m.membersPath())
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return ids, err
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: members: %w", err)
	}
	slices.Sort(ids)
	out := make([]MemberInfo, 0, len(ids))
	for _, id := range ids {
		data, err := dlock.Do(ctx, m.c, func(conn *zk.Conn) ([]byte, error) {
			data, _, err := conn.Get(m.membersPath() + "/" + id)
			return data, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // left while we read
		}
		if err != nil {
			return nil, fmt.Errorf("fleet: member %s: %w", id, err)
		}
		info := MemberInfo{ID: id}
		if err := json.Unmarshal(data, &info.memberRecord); err != nil {
			info.Why = "unreadable member node"
		}
		out = append(out, info)
	}
	return out, nil
}
