package order

import (
	"time"

	"github.com/zkstock/zkstock/dlock/fleet"
	"github.com/zkstock/zkstock/sale"
)

// The fleet: every replica of one FLEET runs the fleet's lock mode, kept in ZooKeeper under
// FleetRoot/<FLEET>, and a switch of mode is a barrier (package dlock/fleet): no change under the
// new mode begins while any replica still has one open under the old. Each change (a purchase, a
// cart, a cancellation) is admitted by the fleet before it reads its mode (sale.Engine.Admit),
// holds its pass until it has answered, and checks before its COMMIT that the pass was not lost,
// as it checks its lock. LOCK_MODE only seeds a fleet that has no mode yet.

// FleetRoot is where fleets live: FleetRoot + "/" + FLEET.
const FleetRoot = "/zkstock/fleets"

// joinFleet starts this replica's membership of its fleet, offering the modes its engine can run.
func (s *Server) joinFleet() (*fleet.Member, error) {
	return fleet.Join(s.locks, fleet.Config{
		Root: FleetRoot + "/" + s.cfg.Fleet, ID: s.cfg.ReplicaID, Seed: string(s.cfg.LockMode), Modes: s.sales.Runnable(),
		CanRun:        func(mode string) error { return s.sales.CanRun(sale.LockMode(mode)) },
		SwitchTimeout: s.switchBound(), Log: s.log, NoDrain: planted.switchNoDrain,
	})
}

// switchBound is how long a switch waits for the fleet: every change open when it queued must be
// able to end (sale.Engine.LongestChange), and a replica that died holding its place must have
// lost its session.
func (s *Server) switchBound() time.Duration {
	if s.cfg.SwitchTimeout > 0 {
		return s.cfg.SwitchTimeout
	}
	return s.sales.LongestChange() + s.cfg.ZKSessionTimeout
}
