package order

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/fleet"
	"github.com/zkstock/zkstock/dlock/teaching"
)

// ZooKeeper's side of security. Every replica authenticates as zkstock's identity (digest,
// ZK_AUTH or ZK_AUTH_FILE) and gives every node it creates under /zkstock, lock paths and lock
// nodes, the fleet's mode, members and barrier, the ACL of dlock.WithDigest: that identity may do
// everything, any client may read. Without an identity a replica refuses to start unless
// ZK_OPEN_ACL=true says, explicitly, that its nodes are to be open to every client of the
// ensemble.

// ZKAuth is zkstock's identity in ZooKeeper: a digest user and password.
type ZKAuth struct {
	User     string
	Password string
}

// ParseZKAuth reads user:password. The user may not contain ':' (the password may) nor either
// be empty.
func ParseZKAuth(s string) (ZKAuth, error) {
	user, password, ok := strings.Cut(s, ":")
	switch {
	case !ok:
		return ZKAuth{}, errors.New("want user:password")
	case user == "" || password == "":
		return ZKAuth{}, errors.New("want user:password, both not empty")
	case strings.ContainsAny(s, "\r\n"):
		return ZKAuth{}, errors.New("user:password spans more than one line")
	}
	return ZKAuth{User: user, Password: password}, nil
}

// LoadZKAuth reads the identity from ZK_AUTH (value) or from the file ZK_AUTH_FILE names (file;
// one line, its newline trimmed), as the official images read their *_FILE settings. Both set is
// an error; neither gives the zero ZKAuth.
func LoadZKAuth(value, file string) (ZKAuth, error) {
	s, err := secretSetting("ZK_AUTH", value, file)
	if err != nil || s == "" {
		return ZKAuth{}, err
	}
	a, err := ParseZKAuth(s)
	if err != nil {
		if file != "" {
			return ZKAuth{}, fmt.Errorf("ZK_AUTH_FILE %s: %w", file, err)
		}
		return ZKAuth{}, fmt.Errorf("ZK_AUTH: %w", err)
	}
	return a, nil
}

// ZKAuthFlags adds -zk-auth and -zk-auth-file to a command's flags; the function it returns,
// called after fs.Parse, loads the identity (LoadZKAuth) from them, or, for a flag not given, from
// ZK_AUTH or ZK_AUTH_FILE in getenv. The usage never shows the environment's values. what says
// who uses the identity, for the usage.
func ZKAuthFlags(fs *flag.FlagSet, getenv func(string) string, what string) func() (ZKAuth, error) {
	value := fs.String("zk-auth", "", "ZooKeeper digest identity user:password "+what+", needed under /zkstock (default $ZK_AUTH)")
	file := fs.String("zk-auth-file", "", "a file holding user:password, instead of -zk-auth (default $ZK_AUTH_FILE)")
	return func() (ZKAuth, error) {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		v, f := *value, *file
		if !given["zk-auth"] {
			v = getenv("ZK_AUTH")
		}
		if !given["zk-auth-file"] {
			f = getenv("ZK_AUTH_FILE")
		}
		return LoadZKAuth(v, f)
	}
}

// IsZero reports that no identity is set.
func (a ZKAuth) IsZero() bool { return a == ZKAuth{} }

// String hides the password.
func (a ZKAuth) String() string {
	if a.IsZero() {
		return "none"
	}
	return a.User + ":<hidden>"
}

// LogValue hides the password from slog.
func (a ZKAuth) LogValue() slog.Value { return slog.StringValue(a.String()) }

// LockOptions are the dlock options of a client of this identity (none without one).
func (a ZKAuth) LockOptions() []dlock.Option {
	if a.IsZero() {
		return nil
	}
	return []dlock.Option{dlock.WithDigest(a.User, a.Password)}
}

func (a ZKAuth) teachingOptions() []teaching.Option {
	if a.IsZero() {
		return nil
	}
	return []teaching.Option{teaching.WithDigest(a.User, a.Password)}
}

// checkZKAuth is the start-up rule: an identity, or the explicit opt-out, not both.
func checkZKAuth(a ZKAuth, open bool) error {
	switch {
	case a.IsZero() && !open:
		return errors.New("ZK_AUTH: zkstock's ZooKeeper identity is not set: set ZK_AUTH=user:password or ZK_AUTH_FILE, " +
			"or ZK_OPEN_ACL=true to create every node open to every client of the ensemble (insecure)")
	case !a.IsZero() && open:
		return errors.New("ZK_OPEN_ACL=true and an identity (ZK_AUTH or ZK_AUTH_FILE) are both set: set one")
	}
	return nil
}

// SecureZK gives the nodes zkstock shares between replicas, when they exist with another ACL
// (made by a replica of an earlier version, or by anyone while they were open), the client's ACL:
// the paths to the fleet's root and the fleet's root, mode, members and barrier, and the paths to
// LockRoot. It needs ADMIN on each (an open node grants it). A SKU's lock path made before keeps
// its ACL until it is idle and ZooKeeper reaps it (a container); docs/interop.md says how to
// change them all at once. Then it vets every SKU's lock path (lockpaths.go): one another
// identity made is deleted when empty, and logged otherwise. With an open client ACL it changes nothing.
func SecureZK(ctx context.Context, c *dlock.Client, fleetName string, log *slog.Logger) error {
	acl := c.ACL()
	if slices.Equal(acl, zk.WorldACL(zk.PermAll)) {
		return nil
	}
	root := FleetRoot + "/" + fleetName
	var paths []string
	for _, p := range []string{root, LockRoot} {
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		for i := range parts {
			if sub := "/" + strings.Join(parts[:i+1], "/"); !slices.Contains(paths, sub) {
				paths = append(paths, sub)
			}
		}
	}
	for _, p := range fleet.Nodes(root) {
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	for _, p := range paths {
		changed, err := dlock.Do(ctx, c, func(conn *zk.Conn) (bool, error) {
			for range 3 { // another replica starting may set it between the read and the write
				have, st, err := conn.GetACL(p)
				switch {
				case errors.Is(err, zk.ErrNoNode) || err == nil && sameACL(have, acl):
					return false, nil
				case err != nil:
					return false, err
				}
				_, err = conn.SetACL(p, acl, st.Aversion)
				switch {
				case err == nil:
					return true, nil
				case errors.Is(err, zk.ErrNoNode):
					return false, nil
				case !errors.Is(err, zk.ErrBadVersion):
					return false, err
				}
			}
			return false, errors.New("its ACL kept changing")
		})
		if err != nil {
			return fmt.Errorf("secure ZooKeeper node %s (zkstock's identity needs ADMIN on it; a ZooKeeper superuser can give it): %w", p, err)
		}
		if changed {
			log.Info("gave a ZooKeeper node made with another ACL zkstock's", "path", p)
		}
	}
	return vetAllLockPaths(ctx, c, acl, log)
}

// sameACL compares two ACLs as sets.
func sameACL(a, b []zk.ACL) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
