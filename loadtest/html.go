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
<p class="meta">{{.R.Config.Requests}} purchases of {{.R.Config.Qty}} × {{.R.Config.SKU}} per mode, {{.R.Config.Concurrency}} in flight,
{{len .R.Config.Targets}} replicas, initial stock {{.R.Config.Stock}}.<br>
Run {{.R.Date}} on {{.R.Machine.Host}} ({{.R.Machine.CPUs}} × {{.R.Machine.CPU}}, {{.R.Machine.OS}}, {{.R.Machine.Go}}).<br>
Command: <code>{{.R.Command}}</code></p>
<table id="summary"><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr class="{{.Class}}">{{range .Cells}}<td>{{.}}</td>{{end}}</tr>{{end}}</table>
<p>Oversold: units sold beyond the initial stock. Lost updates: units sold that never came off the stock
(two buyers read the same stock and both wrote their own result). Undersold: stock left although buyers were told it was gone.</p>
<div class="charts">
<figure>{{.Outcome}}<figcaption>What each mode did to the stock.</figcaption></figure>
<figure>{{.Latency}}<figcaption>Latency distribution (HDR histogram).</figcaption></figure>
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
		R       *Report
		Header  []string
		Rows    []htmlRow
		Outcome template.HTML
		Latency template.HTML
		Stock   []template.HTML
	}{R: r, Header: tableHeader}
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
