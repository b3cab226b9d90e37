package dlock

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/go-zookeeper/zk"
)

// Option configures Connect.
type Option func(*config)

type config struct {
	sessionTimeout time.Duration
	logger         *slog.Logger
	acl            []zk.ACL
	auth           []authInfo
	owner          string
	dialer         zk.Dialer
	naming         Naming
	listener       func(State)
	serverTick     time.Duration
}

type authInfo struct {
	scheme string
	auth   []byte
}

func defaultConfig() config {
	host, _ := os.Hostname()
	return config{
		sessionTimeout: 10 * time.Second,
		logger:         slog.New(slog.DiscardHandler),
		acl:            zk.WorldACL(zk.PermAll),
		owner:          fmt.Sprintf("%s:%d", host, os.Getpid()),
		dialer:         net.DialTimeout,
	}
}

// WithSessionTimeout asks for a ZooKeeper session timeout (default 10s); the server may grant a
// shorter or longer one (see Client.SessionTimeout). A crashed holder keeps its lock this long. A
// holder cut off from ZooKeeper, or talking to a follower cut off from its leader, learns it lost
// the lock (Lease.Lost) before ZooKeeper can give it away: with the default WithServerTick,
// between about 0.43 and 0.57 of the granted timeout after the partition began.
func WithSessionTimeout(d time.Duration) Option { return func(c *config) { c.sessionTimeout = d } }

// WithServerTick tells the client the tickTime of its ZooKeeper servers, which makes Lost close
// later after a partition, still before ZooKeeper can give the lock away, and makes a short
// stall less likely to lose a lease. A request counts towards the session's deadline once a sync
// or write sent G = tick/2 + T/12 after its answer has succeeded: the leader pings followers
// every half tick, and a follower passes its sessions on only in its answers (see "When Lost
// closes" in the package documentation). By default the client assumes the longest tick that
// grants the session under ZooKeeper's default minSessionTimeout of two ticks, half the session
// timeout, so G = T/3. A tick longer than the servers' is safe; a shorter one is not.
func WithServerTick(d time.Duration) Option { return func(c *config) { c.serverTick = d } }

// WithLogger sets where connection and lock events are logged (default: nowhere).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithACL sets the ACL of every node the client creates (default: open to all). The client must
// hold every permission on its nodes that its locks use: create and delete on the lock paths, and
// delete on its own lock nodes.
func WithACL(acl []zk.ACL) Option { return func(c *config) { c.acl = acl } }

// WithDigest authenticates the session as user:password with ZooKeeper's digest scheme, sent again
// on every reconnect, and gives every node the client creates (lock paths and lock nodes)
// DigestACL: only that identity may change or delete it, or create under it; anyone may read it.
// Another client of the ensemble can then look at the queues but can neither queue nor take a
// holder's node away. Curator's authorization("digest", ...) with an ACLProvider returning the
// same ACL, and kazoo's auth_data with the same default_acl, are peers on one path.
func WithDigest(user, password string) Option {
	return func(c *config) {
		c.auth = append(c.auth, authInfo{"digest", []byte(user + ":" + password)})
		c.acl = DigestACL(user, password)
	}
}

// WithAuth adds authentication, sent again on every reconnect (for example "digest", "user:pass").
func WithAuth(scheme string, auth []byte) Option {
	return func(c *config) { c.auth = append(c.auth, authInfo{scheme, auth}) }
}

// WithOwner names this process in the data of its lock nodes, so that a look at the queue shows who
// holds and who waits (default host:pid).
func WithOwner(name string) Option { return func(c *config) { c.owner = name } }

// WithDialer sets how the client dials ZooKeeper servers.
func WithDialer(d zk.Dialer) Option { return func(c *config) { c.dialer = d } }

// WithNaming sets how the client names the lock nodes it creates (default CuratorNaming), so that
// peers of another library on the same lock path see them. Whatever the naming, the client reads
// every library's nodes.
func WithNaming(n Naming) Option { return func(c *config) { c.naming = n } }
