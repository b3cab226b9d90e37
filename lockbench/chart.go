package lockbench

import (
	"fmt"
	"io"

	"github.com/zkstock/zkstock/internal/svgchart"
)

// WriteSVG draws wake-ups per acquisition against the number of contenders, one line per variant
// that counts them: the herd grows, the fair lock stays at one.
func WriteSVG(w io.Writer, rows []Row) error {
	var ss []svgchart.Series
	index := map[string]int{}
	for _, r := range rows {
		if r.WakeupsPerAcq < 0 {
			continue
		}
		i, ok := index[r.Variant]
		if !ok {
			i = len(ss)
			index[r.Variant] = i
			ss = append(ss, svgchart.Series{Name: r.Variant, Color: svgchart.Palette[i%len(svgchart.Palette)]})
		}
		ss[i].Points = append(ss[i].Points, [2]float64{float64(r.Contenders), r.WakeupsPerAcq})
	}
	chart := svgchart.LineChart("Watch wake-ups per acquisition", "contenders (separate sessions)", "wake-ups per acquisition", ss)
	if _, err := io.WriteString(w, string(chart)); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}
