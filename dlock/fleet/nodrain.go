package fleet

import (
	"context"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
)

// The planted mistake Config.NoDrain, for the checker's negative control: a switch that does not
// drain. Nothing else calls these.

// noDrainPlantable says whether Join takes Config.NoDrain: only in a build with the zkstock_lies
// tag (nodrain_on.go); every other build refuses it.
var noDrainPlantable bool

// switchUndrained writes the mode without taking the barrier.
func (m *Member) switchUndrained(ctx context.Context, cur Mode, to string) (Mode, error) {
	_, err := dlock.Do(ctx, m.c, func(conn *zk.Conn) (*zk.Stat, error) {
		return conn.Set(m.modePath(), []byte(to), cur.Version)
	})
	if err != nil {
		return cur, fmt.Errorf("fleet: switch to %q without the barrier: %w", to, err)
	}
	m.log.Warn("fleet: mode switched without the barrier (planted mistake)", "from", cur.Name, "to", to)
	return Mode{Name: to, Version: cur.Version + 1}, nil
}

// adoptUndrained takes the new mode under the hold it has, while the passes admitted under the
// old one go on, then serves until the next change.
func (m *Member) adoptUndrained(ctx context.Context, h *hold) letGo {
	mode, modeWatch, err := m.readMode(ctx, true)
	if err != nil {
		return holdLost
	}
	m.mu.Lock()
	m.mode = mode
	m.mu.Unlock()
	m.log.Warn("fleet: took the new mode without draining (planted mistake)", "mode", mode.Name)
	return m.awaitSwitch(ctx, h, modeWatch)
}
