package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// A revoked hold is lost at once: a pass checked right after its member let the hold go (Close
// gave up waiting for it) must not commit, whether or not the hold's watcher has run yet.
func TestRevokedHoldIsLostAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := dlock.Connect(ctx, testenv.ZKServers(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	root := "/zkstock-test/fleets/" + testenv.UniqueName(t)
	testenv.DeleteZKTreeAtCleanup(t, testenv.ZKServers(t), root)
	m, err := Join(c, Config{Root: root, ID: "m1", Seed: "a", Modes: []string{"a"}, SwitchTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	if err := m.Joined(ctx); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	lease := m.hold.lease
	m.mu.Unlock()
	for i := range 200 {
		h := newHold(lease)
		p := &Pass{m: m, hold: h}
		h.revoke()
		select {
		case <-p.Lost():
		default:
			t.Fatalf("hold %d: a pass is not lost right after its hold was revoked", i)
		}
		if err := h.why(); err == nil {
			t.Fatalf("hold %d: revoked, with no reason", i)
		}
	}
}
