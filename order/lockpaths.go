package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/inventory"
)

// A SKU's lock path (LockRoot/SKU) is zkstock's only if it has zkstock's ACL. One that another
// ZooKeeper identity made before zkstock first used it (ensure_path on a fresh ensemble: a
// persistent node open to all) lets that identity queue there for ever, its nodes taken for the
// holders of zkstock's lock. So a lock path is vetted, when a replica starts (SecureZK) and when
// it first uses it: missing or zkstock's, it is used; another's and empty, zkstock deletes it
// (it may: it owns LockRoot) and dlock makes it anew; another's with nodes under it, every
// change of its SKU is refused at once, 503 lock_path_foreign, not waited on, and the log says
// how to repair it.

// lockVetTimeout bounds the vetting of a path; one that ZooKeeper did not answer in time is not
// held against the change, which meets ZooKeeper's state in its own lock wait.
const lockVetTimeout = 2 * time.Second

// pathVerdict is what vetLockPath found.
type pathVerdict uint8

const (
	pathAbsent   pathVerdict = iota // not there: dlock makes it with zkstock's ACL
	pathOurs                        // zkstock's ACL
	pathRepaired                    // another's, empty, deleted
	pathForeign                     // another's, with nodes under it
)

// vetLockPath judges path against acl, zkstock's; children is how many nodes a foreign one holds.
func vetLockPath(ctx context.Context, c *dlock.Client, path string, acl []zk.ACL) (v pathVerdict, have []zk.ACL, children int, err error) {
	type result struct {
		v        pathVerdict
		have     []zk.ACL
		children int
	}
	r, err := dlock.Do(ctx, c, func(conn *zk.Conn) (result, error) {
		have, st, err := conn.GetACL(path)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return result{v: pathAbsent}, nil
		case err != nil:
			return result{}, err
		case sameACL(have, acl):
			return result{v: pathOurs}, nil
		}
		kids, _, err := conn.Children(path)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return result{}, err
		}
		if len(kids) == 0 {
			// Another's, and nothing holds it: deleting it is zkstock's right on LockRoot. A node
			// added meanwhile makes the delete fail (not empty), and the path stays refused.
			switch err := conn.Delete(path, st.Version); {
			case err == nil, errors.Is(err, zk.ErrNoNode):
				return result{v: pathRepaired, have: have}, nil
			case !errors.Is(err, zk.ErrNotEmpty) && !errors.Is(err, zk.ErrBadVersion) && !errors.Is(err, zk.ErrNoAuth):
				return result{}, err
			}
		}
		return result{v: pathForeign, have: have, children: len(kids)}, nil
	})
	return r.v, r.have, r.children, err
}

// lockPaths is a replica's verdicts on its SKUs' lock paths: the paths found zkstock's, which
// stay so (only zkstock's identity may change their ACL), and when each foreign one was last logged.
type lockPaths struct {
	mu     sync.Mutex
	ours   map[string]bool
	logged map[string]time.Time
}

// foreignLockPath is the answer to a change of a SKU whose lock path is another identity's.
func foreignLockPath(sku string) *apiError {
	return newError(http.StatusServiceUnavailable, "lock_path_foreign",
		"the lock of "+sku+" is held in a ZooKeeper path another identity made, which zkstock does not queue in: nothing was changed; the operator is told in the replica's log how to repair it")
}

// vetsLocks says whether a change in mode has its lock paths vetted: not in the modes whose
// locks are not ZooKeeper paths, nor with an open ACL (ZK_OPEN_ACL).
func (s *Server) vetsLocks(mode LockMode) bool {
	return strings.HasPrefix(string(mode), "zk") && !slices.Equal(s.locks.ACL(), zk.WorldACL(zk.PermAll))
}

// vetLocks vets the lock paths of skus, for a change in mode: nil when the change may take its
// locks (always, when !vetsLocks(mode)).
func (s *Server) vetLocks(ctx context.Context, mode LockMode, skus ...string) *apiError {
	if !s.vetsLocks(mode) {
		return nil
	}
	acl := s.locks.ACL()
	lp := &s.lockPaths
	for _, sku := range skus {
		path := lockPath(sku)
		lp.mu.Lock()
		ours := lp.ours[path]
		lp.mu.Unlock()
		if ours {
			continue
		}
		vctx, cancel := context.WithTimeout(ctx, lockVetTimeout)
		v, have, children, err := vetLockPath(vctx, s.locks, path, acl)
		cancel()
		switch {
		case err != nil:
			s.log.Debug("lock path not vetted", "path", path, "err", err)
		case v == pathOurs:
			lp.mu.Lock()
			lp.ours[path] = true
			lp.mu.Unlock()
		case v == pathRepaired:
			s.log.Warn("deleted a lock path another ZooKeeper identity made, empty: zkstock makes it anew with its ACL", "path", path, "acl", aclString(have))
		case v == pathForeign:
			lp.mu.Lock()
			quiet := time.Since(lp.logged[path]) < time.Minute
			if !quiet {
				lp.logged[path] = time.Now()
			}
			lp.mu.Unlock()
			if !quiet {
				logForeignLockPath(s.log, path, have, children)
			}
			return foreignLockPath(sku)
		}
	}
	return nil
}

// vetOrderLock is vetLocks for a cancellation of order id, whose SKU names the lock: one more
// read of the order, in the modes that vet. An order not found, not the caller's (allowed) or
// cancelled already takes no lock and passes, as does a read that failed: Cancel answers them
// (so that a refusal never tells a caller without the key what the order is).
func (s *Server) vetOrderLock(ctx context.Context, mode LockMode, id int64, allowed func(inventory.Order) bool) *apiError {
	if !s.vetsLocks(mode) {
		return nil
	}
	o, found, err := s.db().OrderByID(ctx, id)
	if err != nil || !found || !allowed(o) || o.CancelledAt != nil {
		return nil
	}
	return s.vetLocks(ctx, mode, o.SKU)
}

func logForeignLockPath(log *slog.Logger, path string, have []zk.ACL, children int) {
	log.Error("a lock path was made by another ZooKeeper identity: its product's changes are refused (503 lock_path_foreign)",
		"path", path, "acl", aclString(have), "nodes_under_it", children,
		"repair", fmt.Sprintf("stop what holds nodes under it, then `zkCli.sh deleteall %s` after `addauth digest` with ZK_AUTH (or as a superuser); zkstock deletes it itself once it is empty", path))
}

// cartSKUs are a cart's SKUs, in its order.
func cartSKUs(cart inventory.Cart) []string {
	skus := make([]string, len(cart.Items))
	for i, it := range cart.Items {
		skus[i] = it.SKU
	}
	return skus
}

func aclString(acl []zk.ACL) string {
	parts := make([]string, len(acl))
	for i, a := range acl {
		parts[i] = fmt.Sprintf("%s:%s:%d", a.Scheme, a.ID, a.Perms)
	}
	return strings.Join(parts, ",")
}

// vetAllLockPaths vets every SKU's lock path at start (SecureZK): repairs the empty foreign ones
// and logs the others. At most maxVettedAtStart are read, in ZooKeeper's order.
func vetAllLockPaths(ctx context.Context, c *dlock.Client, acl []zk.ACL, log *slog.Logger) error {
	const maxVettedAtStart = 100_000
	kids, err := dlock.Do(ctx, c, func(conn *zk.Conn) ([]string, error) {
		kids, _, err := conn.Children(LockRoot)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return kids, err
	})
	if err != nil {
		return fmt.Errorf("list the lock paths: %w", err)
	}
	for _, sku := range kids[:min(len(kids), maxVettedAtStart)] {
		path := LockRoot + "/" + sku
		v, have, children, err := vetLockPath(ctx, c, path, acl)
		switch {
		case err != nil:
			return fmt.Errorf("vet the lock path %s: %w", path, err)
		case v == pathRepaired:
			log.Warn("deleted a lock path another ZooKeeper identity made, empty: zkstock makes it anew with its ACL", "path", path, "acl", aclString(have))
		case v == pathForeign:
			logForeignLockPath(log, path, have, children)
		}
	}
	return nil
}
