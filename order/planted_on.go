//go:build zkstock_lies

package order

import (
	"fmt"
	"os"

	"github.com/zkstock/zkstock/inventory"
)

// A build with the zkstock_lies tag plants the lies ZKSTOCK_LIE names (planted.go); the nemesis
// builds such a replica for its controls only, and no other build has this file.
func init() {
	l, err := parseLies(os.Getenv("ZKSTOCK_LIE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	planted, plantedTag = l, true
	if l.unsafeFlush {
		inventory.PlantUnsafeFlush()
	}
	if l.staleReads {
		inventory.PlantStaleReads()
	}
}
