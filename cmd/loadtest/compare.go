package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/zkstock/zkstock/loadtest"
)

// runCompare is `loadtest compare [-labels A,B] A.json[,A2.json...] B.json[,B2.json...]`: the same
// load on two setups side by side (scripts/galera-bench.sh writes the reports).
func runCompare(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	labels := fs.String("labels", "A,B", "the two setups' names, comma-separated, as the table's columns say them")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: loadtest compare [-labels A,B] A.json[,A2.json...] B.json[,B2.json...]

Prints, as Markdown, two sets of reports (loadtest -json) of the same load on two setups side by
side: per mode, the purchases a second on each (the goodput, in an open loop), their ratio, the
sales' p50 and p99, and what each audit found. Each side is one report or a comma-separated list
of them (one per mode, say); rows are matched by mode.`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	names := strings.Split(*labels, ",")
	if fs.NArg() != 2 || len(names) != 2 || names[0] == "" || names[1] == "" {
		fs.Usage()
		return 2
	}
	sides := make([][]*loadtest.Report, 2)
	for i, list := range fs.Args() {
		for _, path := range strings.Split(list, ",") {
			rep, err := loadReport(path)
			if err != nil {
				fmt.Fprintf(stderr, "loadtest compare: %v\n", err)
				return 1
			}
			sides[i] = append(sides[i], rep)
		}
	}
	if err := loadtest.WriteComparison(stdout, names[0], names[1], sides[0], sides[1]); err != nil {
		fmt.Fprintf(stderr, "loadtest compare: %v\n", err)
		return 1
	}
	return 0
}

// loadReport reads a report loadtest -json wrote.
func loadReport(path string) (*loadtest.Report, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rep := &loadtest.Report{}
	if err := json.Unmarshal(raw, rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rep, nil
}
