package dlock

import "github.com/go-zookeeper/zk"

// DigestACL is the ACL WithDigest gives every node: the digest identity user:password may read,
// write, create, delete and administer it; everyone else may only read it (its data, its
// children and its ACL, whose password hash ZooKeeper shows only to a client with ADMIN), so that
// zkCli.sh and other tools can still look at the queues. A peer of another library on the same
// lock paths gives its nodes the same ACL.
func DigestACL(user, password string) []zk.ACL {
	return append(zk.DigestACL(zk.PermAll, user, password), zk.WorldACL(zk.PermRead)...)
}
