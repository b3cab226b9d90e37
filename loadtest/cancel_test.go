package loadtest

import (
	"slices"
	"testing"
)

// The cancellations are a share of the accepted orders, spread evenly: every k-th for a ratio of
// 1/k, however many requests were refused in between.
func TestDrawCancelIsAShareOfTheAccepted(t *testing.T) {
	for _, tc := range []struct {
		ratio    float64
		accepted int64
		want     []int64
	}{
		{0, 10, nil},
		{0.2, 10, []int64{4, 9}},
		{0.25, 9, []int64{3, 7}},
		{0.1, 20, []int64{9, 19}},
		{1, 3, []int64{0, 1, 2}},
	} {
		var got []int64
		for n := int64(0); n < tc.accepted; n++ {
			if drawCancel(tc.ratio, n) {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Fatalf("ratio %v over %d accepted: cancels %v, want %v", tc.ratio, tc.accepted, got, tc.want)
		}
	}
}
