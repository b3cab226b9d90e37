package dlock

import "sync/atomic"

// Stats counts a Client's ZooKeeper work since Connect.
type Stats struct {
	Creates, Deletes, ChildrenCalls, ExistsCalls, GetCalls int64 // ZooKeeper operations issued
	WatchEvents                                            int64 // watch notifications received by lock waiters
	Acquisitions                                           int64 // successful Lock/RLock/TryLock calls
	// Pipelined counts the children reads (among ChildrenCalls) sent right behind a lock's
	// create, before its reply came: they cost no round trip of their own.
	Pipelined int64
}

// Add is the sum of two clients' counters.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Creates: s.Creates + o.Creates, Deletes: s.Deletes + o.Deletes, ChildrenCalls: s.ChildrenCalls + o.ChildrenCalls,
		ExistsCalls: s.ExistsCalls + o.ExistsCalls, GetCalls: s.GetCalls + o.GetCalls,
		WatchEvents: s.WatchEvents + o.WatchEvents, Acquisitions: s.Acquisitions + o.Acquisitions,
		Pipelined: s.Pipelined + o.Pipelined,
	}
}

// Ops is the number of ZooKeeper operations issued.
func (s Stats) Ops() int64 {
	return s.Creates + s.Deletes + s.ChildrenCalls + s.ExistsCalls + s.GetCalls
}

// RoundTrips is the number of ZooKeeper operations the client waited for one after another: Ops
// less the reads that went out behind a create and came back with it.
func (s Stats) RoundTrips() int64 { return s.Ops() - s.Pipelined }

type counters struct {
	creates, deletes, children, exists, gets, watchEvents, acquisitions, pipelined atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Creates:       c.creates.Load(),
		Deletes:       c.deletes.Load(),
		ChildrenCalls: c.children.Load(),
		ExistsCalls:   c.exists.Load(),
		GetCalls:      c.gets.Load(),
		WatchEvents:   c.watchEvents.Load(),
		Acquisitions:  c.acquisitions.Load(),
		Pipelined:     c.pipelined.Load(),
	}
}
