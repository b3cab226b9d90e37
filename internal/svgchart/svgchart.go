// Package svgchart draws the small line and bar charts of zkstock's reports as plain SVG, so a
// report needs no script and no network to view.
package svgchart

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
)

// Series is one line of a line chart.
type Series struct {
	Name   string
	Color  string
	Dashed bool
	Points [][2]float64
}

// Palette colours series and bars in order.
var Palette = []string{"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"}

const (
	chartW, chartH                    = 560, 300
	padLeft, padRight, padTop, padBot = 60, 16, 30, 44
)

// niceMax rounds v up to 1, 2 or 5 times a power of ten, for axis ticks.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func axes(b *strings.Builder, title, xLabel, yLabel string, xMax, yMax float64) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		chartW, chartH, chartW, chartH, html.EscapeString(title))
	fmt.Fprintf(b, `<text x="%d" y="18" font-size="14" font-weight="bold">%s</text>`, padLeft, html.EscapeString(title))
	x0, y0, x1, y1 := padLeft, chartH-padBot, chartW-padRight, padTop
	for i := 0; i <= 4; i++ {
		y := float64(y0) - float64(i)*float64(y0-y1)/4
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`, x0, x1, y, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>`, x0-6, y+4, fmtNum(yMax*float64(i)/4))
		if xMax > 0 { // bar charts have categories, not a scale, on x
			x := float64(x0) + float64(i)*float64(x1-x0)/4
			fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>`, x, y0+16, fmtNum(xMax*float64(i)/4))
		}
	}
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/><line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/>`,
		x0, x1, y0, y0, x0, x0, y0, y1)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12" text-anchor="middle">%s</text>`, (x0+x1)/2, chartH-8, html.EscapeString(xLabel))
	fmt.Fprintf(b, `<text transform="translate(14 %d) rotate(-90)" font-size="12" text-anchor="middle">%s</text>`, (y0+y1)/2, html.EscapeString(yLabel))
}

// LineChart draws the series on linear axes that start at zero.
func LineChart(title, xLabel, yLabel string, ss []Series) template.HTML {
	xMax, yMax := 0.0, 0.0
	for _, s := range ss {
		for _, p := range s.Points {
			xMax, yMax = math.Max(xMax, p[0]), math.Max(yMax, p[1])
		}
	}
	xMax, yMax = niceMax(xMax), niceMax(yMax)
	var b strings.Builder
	axes(&b, title, xLabel, yLabel, xMax, yMax)
	sx := func(v float64) float64 { return padLeft + v/xMax*float64(chartW-padLeft-padRight) }
	sy := func(v float64) float64 { return float64(chartH-padBot) - v/yMax*float64(chartH-padBot-padTop) }
	for i, s := range ss {
		if len(s.Points) == 0 {
			continue
		}
		pts := make([]string, len(s.Points))
		for j, p := range s.Points {
			pts[j] = fmt.Sprintf("%.1f,%.1f", sx(p[0]), sy(p[1]))
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`, s.Color, dash, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" font-size="11">%s</text>`,
			padLeft+8, padTop+4+i*15, s.Color, padLeft+22, padTop+13+i*15, html.EscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: built from numbers and escaped names only
}

// BarChart draws one group of bars per group, one bar per name.
func BarChart(title, yLabel string, groups []string, names []string, value func(group, name string) float64) template.HTML {
	yMax := 0.0
	for _, g := range groups {
		for _, n := range names {
			yMax = math.Max(yMax, value(g, n))
		}
	}
	yMax = niceMax(yMax)
	var b strings.Builder
	axes(&b, title, "", yLabel, 0, yMax)
	plotW := float64(chartW - padLeft - padRight)
	groupW := plotW / float64(len(groups))
	barW := groupW * 0.7 / float64(len(names))
	for gi, g := range groups {
		gx := float64(padLeft) + float64(gi)*groupW + groupW*0.15
		for ni, n := range names {
			v := value(g, n)
			h := v / yMax * float64(chartH-padBot-padTop)
			x := gx + float64(ni)*barW
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`,
				x, float64(chartH-padBot)-h, barW-2, h, Palette[ni%len(Palette)], html.EscapeString(g), html.EscapeString(n), fmtNum(v))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`, x+barW/2-1, float64(chartH-padBot)-h-3, fmtNum(v))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="12" text-anchor="middle">%s</text>`, gx+groupW*0.35, chartH-padBot+28, html.EscapeString(g))
	}
	for ni, n := range names {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" font-size="11">%s</text>`,
			chartW-170, padTop+4+ni*15, Palette[ni%len(Palette)], chartW-156, padTop+13+ni*15, html.EscapeString(n))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: built from numbers and escaped names only
}

// TimePoint is one operation of a timeline: when it began (seconds from the start) and how long
// it took (seconds), coloured by its class.
type TimePoint struct {
	X, Latency float64
	Class      string
	Title      string // shown on hover for the points of the last class (the rare ones)
}

// Band is a window of time in a lane of a timeline: a fault, from From to To seconds.
type Band struct {
	Lane     string
	From, To float64
	Color    string
	Title    string
}

// Class is a kind of point and its colour.
type Class struct{ Name, Color string }

// maxTimelinePoints bounds the points drawn of each class, so that a long run's picture stays a few
// megabytes: beyond it a class is thinned evenly, and the last class is always drawn whole.
const maxTimelinePoints = 30000

// Timeline draws points (latency on a log scale against time, as Jepsen's latency plots) under
// one lane per band name, and shades every band's window across the plot in its colour, so that
// a latency or an error can be read against the faults that were on at the time. The time axis
// spans exactly what happened, from 0 to the last point or band; every point of every class is
// drawn (a class past maxTimelinePoints evenly thinned, the last class never), and the legend
// gives each class's count.
func Timeline(title string, pts []TimePoint, bands []Band, lanes []string, classes []Class) template.HTML {
	const w, laneH, left, right, plotH, bot = 1000, 14, 110, 16, 300, 44
	const lanesTop = 42 // under the title and the legend's row
	top := lanesTop + len(lanes)*laneH + 8
	h := top + plotH + bot
	xMax := 1.0
	yMaxS := 1.0
	count := map[string]int{}
	for _, p := range pts {
		xMax, yMaxS = math.Max(xMax, p.X), math.Max(yMaxS, p.Latency)
		count[p.Class]++
	}
	for _, b := range bands {
		xMax = math.Max(xMax, b.To)
	}
	const yMinS = 1e-3 // 1 ms
	decades := math.Ceil(math.Log10(yMaxS / yMinS))
	sx := func(v float64) float64 { return left + v/xMax*float64(w-left-right) }
	sy := func(lat float64) float64 {
		d := math.Log10(math.Max(lat, yMinS) / yMinS)
		return float64(top+plotH) - d/decades*float64(plotH)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" font-family="sans-serif">`,
		w, h, w, h, html.EscapeString(title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`, w, h)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="12" font-weight="bold">%s</text>`, left, html.EscapeString(title))
	for i, c := range classes {
		x := left + 140*i
		fmt.Fprintf(&b, `<circle cx="%d" cy="30" r="4" fill="%s"/><text x="%d" y="34" font-size="11" class="legend" data-class="%s" data-count="%d">%s %d</text>`,
			x, c.Color, x+8, html.EscapeString(c.Name), count[c.Name], html.EscapeString(c.Name), count[c.Name])
	}
	laneY := map[string]int{}
	for i, l := range lanes {
		y := lanesTop + i*laneH
		laneY[l] = y
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" text-anchor="end">%s</text>`, left-6, y+10, html.EscapeString(l))
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#eee"/>`, left, w-right, y+laneH-1, y+laneH-1)
	}
	for _, bd := range bands {
		x0, x1 := sx(bd.From), sx(math.Max(bd.To, bd.From))
		x1 = math.Max(x1, x0+1.5) // an instant (a kill) still shows
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.12"/>`, x0, top, x1-x0, plotH, bd.Color)
		if y, ok := laneY[bd.Lane]; ok {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`, x0, y+1, x1-x0, laneH-3, bd.Color, html.EscapeString(bd.Title))
		}
	}
	for i := 0; i <= int(decades); i++ {
		lat := yMinS * math.Pow(10, float64(i))
		y := sy(lat)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`, left, w-right, y, y)
		label := fmt.Sprintf("%s ms", fmtNum(lat*1000))
		if lat >= 1 {
			label = fmt.Sprintf("%s s", fmtNum(lat))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>`, left-6, y+4, label)
	}
	step := niceMax(xMax / 10)
	for i := 0; float64(i)*step <= xMax; i++ {
		v := float64(i) * step
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" text-anchor="middle" class="xtick">%s</text>`, sx(v), top+plotH+16, fmtNum(v))
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/><line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/>`,
		left, w-right, top+plotH, top+plotH, left, left, top, top+plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" text-anchor="middle">seconds since the start</text>`, (left+w-right)/2, h-8)
	fmt.Fprintf(&b, `<text transform="translate(14 %d) rotate(-90)" font-size="12" text-anchor="middle">latency (log)</text>`, top+plotH/2)
	color := map[string]string{}
	rare := ""
	for _, c := range classes {
		color[c.Name] = c.Color
		rare = c.Name
	}
	seen := map[string]int{}
	for _, p := range pts {
		if p.Class != rare {
			seen[p.Class]++
			if every := (count[p.Class] + maxTimelinePoints - 1) / maxTimelinePoints; seen[p.Class]%every != 0 {
				continue
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="1.6" fill="%s" fill-opacity="0.6"/>`, sx(p.X), sy(p.Latency), color[p.Class])
			continue
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.4" fill="%s"><title>%s</title></circle>`, sx(p.X), sy(p.Latency), color[p.Class], html.EscapeString(p.Title))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: built from numbers and escaped names only
}
