package loadtest

import (
	"math"
	"slices"
)

// sweepSteps is how many rates a sweep steps through when only its top is given.
const sweepSteps = 8

// SweepSteps are the rates a sweep to top steps through: 8, spaced evenly on a log scale from
// top/10 up to top. Evenly on a log scale, because the modes' capacities lie an order of
// magnitude apart (zk's hot SKU sells in the low hundreds a second, zk-batch's in the
// thousands): linear steps would put one step, or none, under zk's capacity.
func SweepSteps(top int) []int {
	var out []int
	for i := range sweepSteps {
		r := int(math.Round(float64(top) * math.Pow(10, float64(i-(sweepSteps-1))/float64(sweepSteps-1))))
		if r >= 1 && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}
