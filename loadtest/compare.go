package loadtest

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// WriteComparison writes, as Markdown, the same load on two setups side by side (one MariaDB and
// a Galera cluster, say): per mode, the sales a second on each (the goodput in an open loop),
// the second's over the first's, the p50 and p99 on each (the sales', in an open loop), and what each audit found wrong.
// a and b are each one or more reports of the same kind of run; rows are matched by mode, in a's
// order, and a mode run on one side only is listed with dashes on the other.
func WriteComparison(w io.Writer, labelA, labelB string, a, b []*Report) error {
	if len(a) == 0 || len(b) == 0 {
		return errors.New("comparison: each side needs at least one report")
	}
	open := a[0].Config.OpenLoop()
	for _, r := range append(append([]*Report(nil), a...), b...) {
		if r.Config.OpenLoop() != open {
			return errors.New("comparison: the reports mix closed-loop and open-loop runs")
		}
	}
	rowsA, rowsB := rowsByMode(a), rowsByMode(b)
	rate, latency := "sales/s", "p50 / p99"
	if open {
		rate, latency = "sales/s (goodput)", "sales p50 / p99"
	}
	var s strings.Builder
	fmt.Fprintf(&s, "| mode | %[1]s, %[2]s | %[1]s, %[3]s | %[3]s ÷ %[2]s | %[4]s, %[2]s | %[4]s, %[3]s | audit, %[2]s | audit, %[3]s |\n",
		rate, labelA, labelB, latency)
	s.WriteString("| --- | ---: | ---: | ---: | --- | --- | --- | --- |\n")
	for _, mode := range modesInOrder(a, b) {
		ra, okA := rowsA[mode]
		rb, okB := rowsB[mode]
		ratio := "—"
		if okA && okB && salesRate(ra) > 0 {
			ratio = fmt.Sprintf("%.2f×", salesRate(rb)/salesRate(ra))
		}
		fmt.Fprintf(&s, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", mode,
			cell(okA, func() string { return fmt.Sprintf("%.0f", salesRate(ra)) }),
			cell(okB, func() string { return fmt.Sprintf("%.0f", salesRate(rb)) }),
			ratio,
			cell(okA, func() string { return salesLatency(ra) }),
			cell(okB, func() string { return salesLatency(rb) }),
			cell(okA, func() string { return auditCell(ra) }),
			cell(okB, func() string { return auditCell(rb) }))
	}
	_, err := io.WriteString(w, s.String())
	return err
}

func rowsByMode(reps []*Report) map[string]Row {
	out := map[string]Row{}
	for _, r := range reps {
		for _, row := range r.Rows {
			out[row.Mode] = row
		}
	}
	return out
}

// modesInOrder is every mode of a, in order, then b's that a lacks.
func modesInOrder(a, b []*Report) []string {
	var out []string
	seen := map[string]bool{}
	for _, reps := range [][]*Report{a, b} {
		for _, r := range reps {
			for _, row := range r.Rows {
				if !seen[row.Mode] {
					seen[row.Mode] = true
					out = append(out, row.Mode)
				}
			}
		}
	}
	return out
}

// salesRate is a row's sales a second: the purchases accepted over the run's time (closed loop),
// or the goodput (open loop). Never every answer's rate, which a setup that fails fast would win.
func salesRate(row Row) float64 {
	switch {
	case row.Open != nil:
		return row.Open.GoodputRPS
	case row.Seconds > 0:
		return float64(row.Accepted) / row.Seconds
	}
	return 0
}

// salesLatency is the sales' p50 / p99: in an open loop the 201 class's (from the intended send
// time), in a closed loop every answer's.
func salesLatency(row Row) string {
	if row.Open == nil {
		return fmt.Sprintf("%s / %s", duration(row.P50), duration(row.P99))
	}
	for _, c := range row.Open.Classes {
		if c.Class == "201" {
			return fmt.Sprintf("%s / %s", duration(c.P50), duration(c.P99))
		}
	}
	return "no sales"
}

func auditCell(row Row) string {
	if off := offCell(row); len(off) > 0 {
		return off[0]
	}
	return fmt.Sprintf("exact (%s sold)", thousands(int(row.UnitsSold)))
}

func cell(ok bool, f func() string) string {
	if !ok {
		return "—"
	}
	return f()
}
