// Package fleet keeps a group of processes in one mode of operation, with ZooKeeper as the only
// judge: the mode (a lock mode, in zkstock; to this package an opaque name) is one versioned
// node, the members are ephemeral nodes, and a change of mode is a barrier, not a time window.
//
// # The barrier
//
// Every member serves under a shared hold (dlock.RWMutex.RLock) of the fleet's barrier path and
// reads the mode only once it holds it. A work unit (a "change") is admitted by Member.Enter,
// which hands out a Pass for the mode read under the current hold. Switch takes the barrier
// exclusively: its writer node queues behind the members' readers, every member sees it (a
// children watch on the barrier path), stops admitting, waits for its own passes to end, and
// lets go of its hold; then it asks for a new shared hold, which queues behind the writer. The
// writer holds the barrier only once no member holds it, writes the new mode in one ZooKeeper
// transaction with a check that its own writer node still exists, and lets go; the members get
// their holds back, read the new mode, and admit again. So no pass of the new mode is handed
// out while any member still has one of the old mode open: at every moment the fleet runs one
// mode. A switch that cannot take the barrier within its bound gives up, its node goes, and the
// mode is unchanged: no half-switched fleet.
//
// Why a read/write lock rather than epochs with acknowledgements: dlock's RWMutex already is the
// recipe (FIFO, one wake-up per release, cleanup on every failure path, Lost bounds), members
// that die or are cut off release their hold with their session without anyone deciding they
// are gone, and the same queue a person reads in zkCli tells who holds up a switch.
//
// # Membership in doubt
//
// A member's hold lives with its ZooKeeper session. When dlock says the hold is lost (Lost
// closes before ZooKeeper can hand the barrier to a writer: the session expired, the connection
// was silent too long, the server was a follower cut off from its leader), the member admits
// nothing (Enter answers ErrNotMember at once), waits for its own passes to end, and rejoins:
// a new member node, a new hold, a fresh read of the mode. A pass whose hold is lost has Lost
// closed, and a change must check it before it commits, as it checks its lock's lease.
//
// What a member cut off from ZooKeeper can still commit is therefore exactly what a ZooKeeper lock
// holder cut off can: a change whose commit was sent before Lost closed (and a member that gives
// up waiting for a pass, on Close, revokes the pass before its hold goes). Such a late commit is
// kept apart from the next mode's changes by the database's row lock where they take it first
// (a fenced claim, a locking read, a conditional update) and by nothing else where they read
// plainly (an unfenced mode): across a switch, the old mode's changes are protected as long as
// the member's ZooKeeper session is, as a ZooKeeper lock's holder is, and no longer, even when
// the old mode's own lock (Redis, a table row) would have lasted longer. The order service also
// keeps a pass open while the server still shows a transaction whose COMMIT went unanswered.
//
// # Layout
//
//	<root>/mode           the mode's name; the node's ZooKeeper version is the mode's version
//	<root>/barrier        the barrier's lock nodes (dlock's naming)
//	<root>/members/<id>   one ephemeral node per member: what it can run and what it runs
package fleet
