// Package dlock implements ZooKeeper lock recipes: a fair, herd-free Mutex and a fair RWMutex,
// with fencing tokens and a signal when a holding is lost. They share one lock path with Apache
// Curator's, kazoo's and go-zookeeper's recipes.
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
//     after a create was applied but before its reply arrived, the client finds its own node (after
//     a sync, so that a lagging server cannot hide it) instead of leaving an orphan that blocks
//     everyone; a node of an earlier session is never taken for its own;
//   - gives every Lease a fencing token (the lock path's creation zxid plus the node's sequence
//     number, which grows from holder to holder at no extra request) and a Lost
//     channel that closes before ZooKeeper can give the lock to anyone else (see below);
//   - never blocks in Unlock or TryLock while ZooKeeper is unreachable;
//   - knows whether it holds after one round trip: the queue read goes out right behind the
//     create, before the create's answer is back, and ZooKeeper, which answers a session's
//     requests in order, answers it after applying the create. The answer is used only if it
//     shows the new node (then it was taken after every node ahead was created); otherwise, and
//     whenever the create's answer is lost, the queue is read again as before. An uncontended
//     Lock and Unlock are three requests in two round trips (Stats.RoundTrips); the release
//     still waits for its delete;
//   - re-reads nothing it need not: after its predecessor goes, a waiter checks only the nodes it
//     already knew to be ahead of it, because no new node can ever get ahead;
//   - creates lock paths as container nodes, which ZooKeeper removes when they are empty.
//
// # One queue, whoever wrote the nodes
//
// Every child of a lock path whose name ends in ZooKeeper's 10-character sequence suffix is a
// contender, ordered by that sequence, whichever library created it. It is a reader only if its
// name says so (Curator's "__READ__", kazoo's "__rlock__"); everything else blocks like a writer.
// Children without a sequence suffix are not contenders. So dlock never overlooks a peer; whether
// a peer sees dlock's nodes depends on how dlock names them, which WithNaming chooses:
// CuratorNaming (the default) or KazooNaming.
//
// Which locks can share one path. The "yes" rows are tested in processes of both libraries at once
// (Curator 5.4.0 and kazoo 2.8.0 from Debian 12, go-zookeeper v1.0.4); the "no" rows follow from
// the peers' own rules:
//
//	dlock                     peer                                       share a lock?
//	Mutex, Curator naming     Curator InterProcessMutex                  yes
//	Mutex, Curator naming     go-zookeeper zk.Lock                       yes
//	RWMutex, Curator naming   Curator InterProcessReadWriteLock          yes: readers share, writers exclude all
//	Mutex, kazoo naming       kazoo Lock, WriteLock                      yes
//	RWMutex, kazoo naming     kazoo WriteLock, ReadLock                  yes: readers share, writers exclude all
//	Mutex, Curator naming     kazoo anything                             no: kazoo sees only "__lock__"/"__rlock__" nodes
//	Mutex, kazoo naming       Curator anything                           no: Curator orders names without "lock-" by the whole name
//	Mutex                     Curator InterProcessReadWriteLock readers  no: Curator readers see only "__WRIT__" nodes
//	RWMutex, Curator naming   Curator InterProcessMutex                  no: Curator's mutex sorts "__WRIT__" names last
//
// Curator and kazoo never see each other's nodes, so a path must not be shared by those two at
// all, whatever dlock does. kazoo 2.8.0 (Debian 12's) has a bug of its own: a ReadLock waits for
// writers queued after it and deadlocks with them (python-zk/kazoo#649, fixed in kazoo 2.9.0).
// Every fair library above serves the queue in order, so FIFO holds across libraries.
//
// # When Lost closes
//
// ZooKeeper's leader expires a session once it has not touched it for the session timeout T the
// server granted (which may differ from the one asked for: see Client.SessionTimeout). The leader
// touches a session when a request of it reaches the leader itself; a follower answers pings and
// reads on its own and passes its sessions' touches on only in its answers to the leader's pings,
// sent every half tick. So a follower cut off from its leader goes on answering for up to
// syncLimit × tickTime while the leader expires the session, and an answer alone proves nothing.
//
// What proves a touch is a sync or a write that succeeded, which only the leader can answer, sent
// at least G = tick/2 + T/12 after another request on the same connection was answered: the
// follower's link to the leader carried the touch of that request (in a ping answer) before it
// carried the sync or write. Here tick is WithServerTick, or T/2 when not given (the longest tick
// that grants the session under ZooKeeper's default minSessionTimeout of two ticks). The connect
// response proves its own send time (the leader revalidates the session). With S the send time of
// the latest request proved so, dlock closes Lost, on the client's monotonic clock, at
//
//	S + T − T/10
//
// unless a newer proof moves S on. It also closes when the server reports the session expired,
// when the node is deleted by anyone else, and on Close. While no lock is taken or released the
// client sends a sync every T/15 to keep S moving; taking and releasing locks are writes and
// prove S at no cost. The proof of the rule is in heard.go.
//
// The guarantee: Lost closes before ZooKeeper can give the lock to another client, whether the
// client's connection is reset, silent (open, nothing arrives), or to a follower cut off from its
// leader, and whatever syncLimit the servers run with. It assumes:
//
//   - the client's and the leader's clocks run at rates close enough that T − T/10 on one is less
//     than T on the other, with room left for the client's own scheduling;
//   - tick is at least the servers' tickTime (the leader pings followers every half tick);
//   - a link between two servers delivers a ping within T/12, or not at all until one end gives
//     up on it (a follower that stops following closes its clients' connections);
//   - a sync does not reach the leader in the instant between its marking the session expired and
//     proposing its close, after a follower-to-leader link held its bytes back for about T.
//
// After a partition begins Lost closes between 0.9T − G − 2T/15 and 0.9T − G later, about 0.43T
// to 0.57T with the default tick, and at 0.9T at the latest right after a connect. Measured on a
// three-peer ensemble (tickTime 250 ms, syncLimit 12: its follower answers for 3 s when cut off)
// with 2 s sessions, the holder on the follower and a waiter on the other peers, the follower's
// quorum and election links black-holed at 0 ms (TestLostClosesBeforeAnotherHoldsWhenTheFollowerIsCutOff):
//
//	                                  holder's Lost closed   other client held
//	before (any answer moved S)       4049 to 4721 ms        1699 to 1846 ms
//	now, tick assumed (G = 667 ms)    973 to 1108 ms         1976 to 2093 ms
//	now, WithServerTick(250ms)        1282 to 1301 ms        1977 to 2095 ms
//
// What the margin cannot cover is a process that is paused past it (a stop-the-world pause, a
// frozen VM): that is what the fencing token is for.
//
// # The API
//
// Like etcd's concurrency package, dlock keeps the surface a lock's user needs small: Client (one
// session, its connection states through WithStateListener), Mutex, RWMutex, Lease (token, Lost,
// Context, Unlock), LockAll for several locks at once, errors, options and Stats. Locks are
// reentrant through the context only (see Mutex.Lock). The textbook recipes it is measured against
// (spin, node-watch, herd) live in dlock/teaching.
//
// A few more exported names are an advanced surface that taking and releasing locks never needs:
// Client.Queue and Client.QueueChanged read and watch a lock's queue for people and dashboards (a
// queue page), Client.QueueStat reads its size and how often it moved (a QueueStat) in one request,
// from which a caller can foresee a newcomer's wait before it joins, and Do runs a raw go-zookeeper request on the client's session, for
// recipes whose nodes must share the locks' session (package fleet builds on it). Do hands over
// the *zk.Conn itself: what a request through it does is ZooKeeper's contract, not dlock's.
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
// leave the lock held; Unlock never waits for an unreachable ZooKeeper, so the deferred call
// cannot hang.
package dlock
