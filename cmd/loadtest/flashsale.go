package main

import (
	"fmt"
	"io"

	"github.com/zkstock/zkstock/loadtest"
)

// runFlashSale is `loadtest flash-sale UNITS.json AMPLE.json`: the flash-sale table of two
// open-loop reports (-json) of the same modes, one that sold a few units out, one with stock for
// every buyer (scripts/flash-sale.sh writes them).
func runFlashSale(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: loadtest flash-sale UNITS.json AMPLE.json\n\nPrints, as Markdown, the flash-sale table of two open-loop reports (loadtest -rate ... -json):\none with few units, one with stock for every buyer.")
		return 2
	}
	reps := make([]*loadtest.Report, 2)
	for i, path := range args {
		rep, err := loadReport(path)
		if err != nil {
			fmt.Fprintf(stderr, "loadtest flash-sale: %v\n", err)
			return 1
		}
		reps[i] = rep
	}
	if err := loadtest.WriteFlashSale(stdout, reps[0], reps[1]); err != nil {
		fmt.Fprintf(stderr, "loadtest flash-sale: %v\n", err)
		return 1
	}
	return 0
}
