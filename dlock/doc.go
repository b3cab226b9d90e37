// Package dlock implements ZooKeeper lock recipes: a fair, herd-free Mutex and a fair RWMutex,
// with fencing tokens and a signal when a holding is lost.
//
// # The recipe
//
// Every Lock call creates an EPHEMERAL_SEQUENTIAL node under the lock's path. The lowest
// sequence number holds the lock. Each waiter watches only the node just before its own (a
// reader: the last writer before it), so a release wakes exactly one waiter and waiters are served
// in the order they arrived. A crashed holder's session ends and its node vanishes with it, so the
// lock is never stuck for longer than the session timeout.
//
// Beyond the textbook recipe (and go-zookeeper's zk.Lock), dlock:
//
//   - takes a context.Context in every call that waits, and deletes the waiter's node on every
//     failure path (cancelled context, ZooKeeper error, client closed);
//   - names nodes with a per-attempt GUID ("protected" nodes), so that when the connection drops
//     after a create was applied but before its reply arrived, the client finds its own node
//     instead of leaving an orphan that blocks everyone; a node of an earlier session is never
//     taken for its own;
//   - gives every Lease a fencing token (the node's creation zxid, which only grows) and a Lost
//     channel that closes when the session expires, the node is deleted by someone else, or the
//     connection has been down for two thirds of the session timeout;
//   - re-reads nothing it need not: after its predecessor goes, a waiter checks only the nodes it
//     already knew to be ahead of it, because no new node can ever get ahead;
//   - creates lock paths as container nodes, which ZooKeeper removes when they are empty.
//
// # Teaching variants
//
// SpinLock (retry creating one fixed node), NodeWatchLock (everyone watches one fixed node) and
// HerdLock (sequential nodes, everyone watches the children list) implement Locker beside Mutex.
// They are correct but costly, and exist to be measured against it: with n waiters each release
// wakes about (n+1)/2 of them on average in the watch-based ones, against exactly one for Mutex.
//
// # Using a lease
//
// Hold the lock for as short as you can, stop when Lost closes, and pass Token to the storage
// you write to, so that it can refuse a holder that lost the lock without knowing it yet:
//
//	lease, err := mu.Lock(ctx)
//	if err != nil { ... }
//	defer lease.Unlock(context.WithoutCancel(ctx))
//	select {
//	case <-lease.Lost():
//	    return lease.Err()
//	default:
//	}
//	store.Write(value, lease.Token())
//
// Release with a context the request cannot cancel, so that a caller who hangs up does not
// leave the lock held.
package dlock
