package loadtest

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// WriteFlashSale writes the flash-sale table (Markdown) of two open-loop runs of the same modes:
// units, a sell-out (few units, many buyers), and ample, stock for every buyer. Per mode: what
// was sold and how fast, then what the buyers who came after the sell-out were told and how
// fast; and, with ample stock, the goodput and every answer class's p99.
func WriteFlashSale(w io.Writer, units, ample *Report) error {
	if !units.Config.OpenLoop() || !ample.Config.OpenLoop() {
		return errors.New("flash-sale table: both reports must come from open-loop runs (-rate)")
	}
	byMode := map[string]Row{}
	for _, row := range ample.Rows {
		byMode[row.Mode] = row
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| mode | %s units, %s buyers/s for %s: sold / answers to the buyers who came after the sell-out | ample stock, %s buyers/s: sales per second / p99 by answer |\n| --- | --- | --- |\n",
		thousands(units.Config.Stock), thousands(units.Config.Rate), units.Config.Duration, thousands(ample.Config.Rate))
	seen := map[string]bool{}
	for _, row := range units.Rows {
		seen[row.Mode] = true
		other, ok := byMode[row.Mode]
		amp := "—"
		if ok {
			amp = ampleCell(other)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", row.Mode, unitsCell(row), amp)
	}
	for _, row := range ample.Rows {
		if !seen[row.Mode] {
			fmt.Fprintf(&b, "| %s | — | %s |\n", row.Mode, ampleCell(row))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func unitsCell(row Row) string {
	o := row.Open
	if o == nil {
		return "—"
	}
	var parts []string
	switch {
	case o.SoldOut && len(o.LaterBuyers) > 0:
		parts = append(parts, fmt.Sprintf("%s sold in %s; then %s", thousands(int(row.UnitsSold)), duration(o.SoldOutAtMS), classList(o.LaterBuyers, 0)))
	case o.SoldOut:
		// Sold out only after the last buyer came: what the queued buyers were told instead.
		parts = append(parts, fmt.Sprintf("%s sold in %s, after the last buyer came; answered after it: %s", thousands(int(row.UnitsSold)),
			duration(o.SoldOutAtMS), classList(o.AnsweredAfter, 0)))
	default:
		parts = append(parts, fmt.Sprintf("%s sold, %s left: not sold out; %s", thousands(int(row.UnitsSold)), thousands(int(row.FinalStock)), classList(o.Classes, 0)))
	}
	return strings.Join(append(parts, offCell(row)...), "; ")
}

func ampleCell(row Row) string {
	o := row.Open
	if o == nil {
		return "—"
	}
	return strings.Join(append([]string{fmt.Sprintf("**%.0f/s**; %s", o.GoodputRPS, classList(o.Classes, o.Sends))}, offCell(row)...), "; ")
}

// offCell says, in bold, what a mode got wrong with the stock, if anything.
func offCell(row Row) []string {
	if row.Oversold == 0 && row.LostUpdates == 0 && row.Undersold == 0 {
		return nil
	}
	return []string{fmt.Sprintf("**oversold %d, lost updates %d, undersold %d**", row.Oversold, row.LostUpdates, row.Undersold)}
}

// classList is "2,909 × `409 out_of_stock` p50 4.9 s, p99 5.2 s, ..."; with a total, each class's share too.
func classList(cs []ClassStats, total int) string {
	if len(cs) == 0 {
		return "no answers"
	}
	items := make([]string, len(cs))
	for i, c := range cs {
		share := ""
		if total > 0 {
			share = fmt.Sprintf(" (%.0f%%)", 100*float64(c.Count)/float64(total))
		}
		items[i] = fmt.Sprintf("%s × `%s`%s p50 %s, p99 %s", thousands(c.Count), c.Class, share, duration(c.P50), duration(c.P99))
	}
	return strings.Join(items, ", ")
}

// duration prints milliseconds as a person reads them: 7 ms, 33 ms, 467 ms, 4.9 s.
func duration(ms float64) string {
	switch {
	case ms < 10:
		return fmt.Sprintf("%.1f ms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f s", ms/1000)
}

// thousands is n with a comma between groups of three digits: 10,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
