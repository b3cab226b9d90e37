package loadtest

import (
	"fmt"
	"html/template"
	"io"

	"github.com/zkstock/zkstock/internal/svgchart"
)

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>zkstock load test</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.bad{background:#fde0dc;font-weight:bold}.good{background:#e3f4e1}
.charts{display:flex;flex-wrap:wrap;gap:1em}.meta{color:#555;font-size:90%}
</style></head><body>
<h1>zkstock: lock off against lock on</h1>
<p class="meta">{{if .R.Config.SweepRates}}Open loop: purchases of {{.R.Config.Qty}} × {{.R.Config.SKU}} at {{.R.Config.SweepRates}} per second, {{.R.Config.Duration}} each, per mode, with stock for every purchase;
latency from each purchase's intended send time.{{else if .R.Config.Rate}}Open loop: {{.R.Config.Rate}} purchases of {{.R.Config.Qty}} × {{.R.Config.SKU}} per second for {{.R.Config.Duration}} per mode,
latency from each purchase's intended send time.{{else}}{{.R.Config.Requests}} purchases of {{.R.Config.Qty}} × {{.R.Config.SKU}} per mode, {{.R.Config.Concurrency}} in flight,{{end}}
{{len .R.Config.Targets}} replicas, initial stock {{.R.Config.Stock}}.<br>
Run {{.R.Date}} on {{.R.Machine.Host}} ({{.R.Machine.CPUs}} × {{.R.Machine.CPU}}, {{.R.Machine.OS}}, {{.R.Machine.Go}}).<br>
Command: <code>{{.R.Command}}</code></p>
<table id="summary"><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr class="{{.Class}}">{{range .Cells}}<td>{{.}}</td>{{end}}</tr>{{end}}</table>
<p>Oversold: units sold beyond the initial stock. Lost updates: units sold that never came off the stock
(two buyers read the same stock and both wrote their own result). Undersold: stock left although buyers were told it was gone.</p>
{{range .Open}}<table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</table>{{end}}
{{if .Sweep}}<h2>Offered load</h2>
<div class="charts">{{range .Sweep}}<figure>{{.}}</figure>{{end}}</div>
<p>Each step sends at its rate whatever the answers do; goodput is the sales a second, p99 the 99th percentile
of every answer's latency from its intended send time. Past a mode's capacity goodput flattens, or collapses.</p>{{end}}
<div class="charts">
<figure>{{.Outcome}}<figcaption>What each mode did to the stock.</figcaption></figure>
{{if .Latency}}<figure>{{.Latency}}<figcaption>Latency distribution (HDR histogram).</figcaption></figure>{{end}}
{{if .Timeline}}<figure>{{.Timeline}}<figcaption>Latency by intended send time: flat while the service keeps up.</figcaption></figure>{{end}}
</div>
<h2>Stock over time</h2>
<div class="charts">{{range .Stock}}<figure>{{.}}</figure>{{end}}</div>
</body></html>
`))

type htmlRow struct {
	Class string
	Cells []string
}

// WriteHTML writes a self-contained HTML report: the table and SVG charts, no scripts, no links.
func (r *Report) WriteHTML(w io.Writer) error {
	data := struct {
		R        *Report
		Header   []string
		Rows     []htmlRow
		Outcome  template.HTML
		Latency  template.HTML
		Stock    []template.HTML
		Open     []table
		Sweep    []template.HTML
		Timeline template.HTML
	}{R: r, Header: tableHeader, Open: r.openTables()}
	if len(r.Config.SweepRates) > 0 {
		data.Sweep = sweepCharts(r.Rows)
	} else if r.Config.OpenLoop() {
		data.Timeline = timelineChart(r.Rows)
	}
	var modes []string
	var lat []svgchart.Series
	for i, row := range r.Rows {
		class := "good"
		if row.Oversold != 0 || row.LostUpdates != 0 || row.Undersold != 0 {
			class = "bad"
		}
		data.Rows = append(data.Rows, htmlRow{Class: class, Cells: row.cells()})
		modes = append(modes, row.Mode)
		s := svgchart.Series{Name: row.Mode, Color: svgchart.Palette[i%len(svgchart.Palette)]}
		for _, p := range row.Latency {
			s.Points = append(s.Points, [2]float64{p.Percentile, p.Millis})
		}
		lat = append(lat, s)
		data.Stock = append(data.Stock, stockChart(row, r.Config.Qty))
	}
	byMode := map[string]Row{}
	for _, row := range r.Rows {
		byMode[row.Mode] = row
	}
	data.Outcome = svgchart.BarChart("Units: sold, oversold, lost updates", "units", modes, []string{"units sold", "oversold", "lost updates"},
		func(mode, name string) float64 {
			row := byMode[mode]
			switch name {
			case "units sold":
				return float64(row.UnitsSold)
			case "oversold":
				return float64(row.Oversold)
			}
			return float64(row.LostUpdates)
		})
	data.Latency = svgchart.LineChart("Latency by percentile", "percentile", "ms", lat)
	if len(r.Config.SweepRates) > 0 {
		// A sweep's rows are its steps: per step, neither the percentiles nor the stock tell
		// much, the sweep charts do.
		data.Latency, data.Stock = "", nil
	}
	if err := reportTemplate.Execute(w, data); err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	return nil
}

// stockChart draws, for one mode, the stock each accepted purchase reported against the units
// sold so far: with a working lock the two lines cross once at the initial stock; without one
// the sold line runs far past it while the stock barely moves.
func stockChart(row Row, qty int) template.HTML {
	stock := svgchart.Series{Name: "stock reported by each sale", Color: "#1f77b4"}
	sold := svgchart.Series{Name: "units sold so far", Color: "#d62728"}
	initial := svgchart.Series{Name: "initial stock", Color: "#555", Dashed: true}
	stock.Points = append(stock.Points, [2]float64{0, float64(row.InitialStock)})
	sold.Points = append(sold.Points, [2]float64{0, 0})
	end := row.Seconds * 1000
	for i, s := range row.Sales {
		stock.Points = append(stock.Points, [2]float64{s.AtMillis, float64(s.Remaining)})
		sold.Points = append(sold.Points, [2]float64{s.AtMillis, float64((i + 1) * qty)})
	}
	initial.Points = [][2]float64{{0, float64(row.InitialStock)}, {end, float64(row.InitialStock)}}
	return svgchart.LineChart(fmt.Sprintf("mode %s: stock and sales", row.Mode), "ms since start", "units", []svgchart.Series{stock, sold, initial})
}

// sweepCharts draw, per mode, the offered rate against goodput and against p99.
func sweepCharts(rows []Row) []template.HTML {
	var modes []string
	byMode := map[string][]Row{}
	for _, row := range rows {
		if row.Open == nil {
			continue
		}
		if byMode[row.Mode] == nil {
			modes = append(modes, row.Mode)
		}
		byMode[row.Mode] = append(byMode[row.Mode], row)
	}
	offered := svgchart.Series{Name: "offered", Color: "#555", Dashed: true}
	var goodput, p99 []svgchart.Series
	for i, mode := range modes {
		color := svgchart.Palette[i%len(svgchart.Palette)]
		g, p := svgchart.Series{Name: mode, Color: color}, svgchart.Series{Name: mode, Color: color}
		for _, row := range byMode[mode] {
			g.Points = append(g.Points, [2]float64{row.Open.OfferedRPS, row.Open.GoodputRPS})
			p.Points = append(p.Points, [2]float64{row.Open.OfferedRPS, row.P99})
			if len(offered.Points) < len(byMode[mode]) {
				offered.Points = append(offered.Points, [2]float64{row.Open.OfferedRPS, row.Open.OfferedRPS})
			}
		}
		goodput, p99 = append(goodput, g), append(p99, p)
	}
	return []template.HTML{
		svgchart.LineChart("Goodput against offered load", "offered purchases/s", "sales/s", append(goodput, offered)),
		svgchart.LineChart("p99 against offered load", "offered purchases/s", "p99 ms, every answer", p99),
	}
}

// timelineChart draws each mode's p99 by intended send time.
func timelineChart(rows []Row) template.HTML {
	var ss []svgchart.Series
	for i, row := range rows {
		if row.Open == nil {
			continue
		}
		s := svgchart.Series{Name: row.Mode + " p99", Color: svgchart.Palette[i%len(svgchart.Palette)]}
		for _, p := range row.Open.Timeline {
			s.Points = append(s.Points, [2]float64{p.AtMS / 1000, p.P99})
		}
		ss = append(ss, s)
	}
	return svgchart.LineChart("Latency by intended send time", "s since the start", "p99 ms", ss)
}
