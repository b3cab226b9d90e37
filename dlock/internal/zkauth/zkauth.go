// Package zkauth holds the one ACL rule of zkstock's ZooKeeper nodes, shared by dlock and its
// teaching recipes.
package zkauth

import "github.com/go-zookeeper/zk"

// ACL is what a node created by the digest identity user:password gets: that identity may read,
// write, create, delete and administer it; everyone else may only read it (its data, its
// children, its ACL), so that zkCli.sh, zkstat and the live page can still look.
func ACL(user, password string) []zk.ACL {
	return append(zk.DigestACL(zk.PermAll, user, password), zk.WorldACL(zk.PermRead)...)
}
