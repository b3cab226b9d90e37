package sale

import (
	"errors"
	"strings"
	"testing"

	"github.com/zkstock/zkstock/inventory"
)

// Each mode is one row, and a mode that is not a row is an error, never another mode.
func TestModeTable(t *testing.T) {
	seen := map[LockMode]bool{}
	for _, lm := range modeTable {
		if seen[lm.name] {
			t.Fatalf("%s has two rows", lm.name)
		}
		seen[lm.name] = true
		if lm.protect == inventory.Fenced && lm.lock == nil {
			t.Errorf("%s is fenced but takes no lock to issue tokens", lm.name)
		}
		if lm.batched && lm.lock == nil {
			t.Errorf("%s batches without a lock", lm.name)
		}
		// The load tools, which know the service over HTTP only, tell a Redis mode by its name.
		if strings.HasPrefix(string(lm.name), "redis") != lm.needsRedis {
			t.Errorf("%s: a mode's name starts with redis exactly when Redis keeps its lock", lm.name)
		}
		if got, err := ParseLockMode(string(lm.name)); err != nil || got != lm.name {
			t.Errorf("ParseLockMode(%s) = %s, %v", lm.name, got, err)
		}
	}
	if len(LockModes) != len(modeTable) {
		t.Fatalf("LockModes has %d modes, the table %d", len(LockModes), len(modeTable))
	}
	if _, err := modeOf("zk-fancy"); !errors.Is(err, errUnknownMode) {
		t.Fatalf("an unknown mode: %v, want errUnknownMode", err)
	}
	if _, err := ParseLockMode("zk-fancy"); err == nil {
		t.Fatal("ParseLockMode accepted an unknown mode")
	}
}
