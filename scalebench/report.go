package scalebench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/zkstock/zkstock/internal/svgchart"
)

// WriteMarkdown writes each run's limits and a table of its cells.
func WriteMarkdown(w io.Writer, results []Result) error {
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "#### %s\n\nRaw limits in the same run: ZooKeeper **%.0f** create+delete pairs/s (%d sessions), the database **%.0f** single-row conditional UPDATE commits/s (%d connections).\n\n",
			r.Setup, r.Limits.ZooKeeperPairs, r.Limits.Sessions, r.Limits.DBCommits, r.Limits.Connections)
		b.WriteString("| mode | SKUs | spread | purchases/s | p50 ms | p99 ms | ZooKeeper ops / purchase | purchases / lock | binding limit | share of it | exact |\n")
		b.WriteString("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |\n")
		for _, c := range r.Cells {
			ops, perLock := "—", "—"
			if c.ZKOpsPerSale > 0 {
				ops = fmt.Sprintf("%.1f", c.ZKOpsPerSale)
			}
			if locksWithZooKeeper(c.Mode) {
				perLock = fmt.Sprintf("%.1f", c.SalesPerLock)
			}
			exact := "yes"
			if !c.Exact {
				exact = "**no**"
			}
			if c.Errors > 0 {
				exact += fmt.Sprintf(" (%d errors: %s)", c.Errors, strings.TrimSpace(c.ErrorExamples))
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %.1f | %.1f | %s | %s | %s (%.0f/s) | %.0f%% | %s |\n",
				c.Mode, c.SKUs, c.Dist, c.Throughput, c.P50ms, c.P99ms, ops, perLock, c.Binding, ceiling(c), 100*c.BindingRatio, exact)
		}
		b.WriteString("\n")
		writeCPU(&b, r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeCPU writes where each cell's CPU went: how full the machine was, and the CPU time per
// purchase of each kind of process.
func writeCPU(b *strings.Builder, r Result) {
	var cells []Cell
	for _, c := range r.Cells {
		if c.CPU != nil {
			cells = append(cells, c)
		}
	}
	if len(cells) == 0 {
		return
	}
	fmt.Fprintf(b, "Where the CPU went (%s): processors busy during the load, and CPU milliseconds per purchase by process; "+
		"the database's statements per purchase; the floor, the servers' CPU for the cell's ZooKeeper ops and statements at the raw phases' prices "+
		"(%.4f ms per ZooKeeper op, %.4f ms per statement), and the CPU of replicas, ZooKeeper and database over it.\n\n",
		r.Setup, r.Limits.ZKCPUPerOpMs, r.Limits.DBCPUPerStatementMs)
	b.WriteString("| mode | SKUs | spread | processors busy |")
	for _, k := range cpuKinds {
		fmt.Fprintf(b, " %s |", k)
	}
	b.WriteString(" total | statements / purchase | floor ms | (replicas+ZooKeeper+database) / floor |\n| --- | ---: | --- | ---: |")
	for range cpuKinds {
		b.WriteString(" ---: |")
	}
	b.WriteString(" ---: | ---: | ---: | ---: |\n")
	for _, c := range cells {
		fmt.Fprintf(b, "| %s | %d | %s | %.2f of %d |", c.Mode, c.SKUs, c.Dist, c.CPU.CoresBusy, c.CPU.Cores)
		var total float64
		for _, k := range cpuKinds {
			ms := c.CPU.MsPerPurchase[k]
			total += ms
			fmt.Fprintf(b, " %.2f |", ms)
		}
		fmt.Fprintf(b, " %.2f |", total)
		stmts, floor, ratio := "—", "—", "—"
		if c.Statements != nil {
			stmts = fmt.Sprintf("%.2f", c.Statements["Questions"])
		}
		if c.FloorMs > 0 {
			floor = fmt.Sprintf("%.3f", c.FloorMs)
			ratio = fmt.Sprintf("%.1f×", (c.CPU.MsPerPurchase["replicas"]+c.CPU.MsPerPurchase["ZooKeeper"]+c.CPU.MsPerPurchase["database"])/c.FloorMs)
		}
		fmt.Fprintf(b, " %s | %s | %s |\n", stmts, floor, ratio)
	}
	b.WriteString("\n")
}

func ceiling(c Cell) float64 {
	if c.Binding == "ZooKeeper" {
		return c.ZKCeiling
	}
	return c.DBCeiling
}

// WriteCharts draws purchases per second against the number of SKUs, one chart per setup and
// spread, one bar per mode: dir/scale-<setup>-<spread>.svg.
func WriteCharts(dir string, results []Result) ([]string, error) {
	var files []string
	for _, r := range results {
		dists := map[string]bool{}
		for _, c := range r.Cells {
			dists[c.Dist] = true
		}
		for dist := range dists {
			var groups, modes []string
			seenG, seenM := map[string]bool{}, map[string]bool{}
			value := map[[2]string]float64{}
			for _, c := range r.Cells {
				if c.Dist != dist && c.SKUs != 1 {
					continue
				}
				g := strconv.Itoa(c.SKUs) + " SKUs"
				if !seenG[g] {
					seenG[g] = true
					groups = append(groups, g)
				}
				if !seenM[c.Mode] {
					seenM[c.Mode] = true
					modes = append(modes, c.Mode)
				}
				value[[2]string{g, c.Mode}] = c.Throughput
			}
			chart := svgchart.BarChart(fmt.Sprintf("Purchases per second, %s, %s spread", r.Setup, dist), "purchases/s", groups, modes,
				func(g, m string) float64 { return value[[2]string{g, m}] })
			name := filepath.Join(dir, fmt.Sprintf("scale-%s-%s.svg", slug(r.Setup), dist))
			if err := os.WriteFile(name, []byte(chart), 0o644); err != nil {
				return files, fmt.Errorf("chart: %w", err)
			}
			files = append(files, name)
		}
	}
	return files, nil
}

func slug(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
}
