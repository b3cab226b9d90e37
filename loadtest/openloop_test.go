package loadtest

import (
	"slices"
	"testing"
	"time"
)

// The plan is vegeta's constant pacer on a clock that is never late: rate × duration sends, one
// interval apart, the last at the duration.
func TestPlan(t *testing.T) {
	for _, c := range []struct {
		rate int
		d    time.Duration
		want int
	}{{200, 2 * time.Second, 400}, {1000, 10 * time.Second, 10000}, {3, time.Second, 3}, {7, 1500 * time.Millisecond, 10}} {
		if got := countPlan(c.rate, c.d); got != c.want {
			t.Errorf("%d/s for %v: %d sends, want %d", c.rate, c.d, got, c.want)
		}
	}
	p := newPlan(200, time.Second)
	var prev time.Duration
	for at, ok := p.next(); ok; at, ok = p.next() {
		if at-prev != 5*time.Millisecond {
			t.Fatalf("send at %v after %v: want 5 ms apart", at, prev)
		}
		prev = at
	}
	if prev != time.Second {
		t.Fatalf("last send at %v, want 1s", prev)
	}
}

func TestSweepSteps(t *testing.T) {
	if got, want := SweepSteps(1000), []int{100, 139, 193, 268, 373, 518, 720, 1000}; !slices.Equal(got, want) {
		t.Errorf("SweepSteps(1000) = %v, want %v", got, want)
	}
	if got := SweepSteps(5); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Errorf("SweepSteps(5) = %v: want the distinct rates of at least 1", got)
	}
}

func TestAnswerClass(t *testing.T) {
	for _, c := range []struct {
		s    sample
		want string
	}{
		{sample{status: 201}, "201"},
		{sample{status: 409, code: "out_of_stock"}, "409 out_of_stock"},
		{sample{status: 503, code: "sku_busy"}, "503 sku_busy"},
		{sample{status: 503}, "503"},
		{sample{status: 429, code: "slow_down"}, "429 slow_down"},
		{sample{code: codeClientTimeout}, "client timeout"},
		{sample{code: codeClientError}, "client error"},
	} {
		if got := answerClass(c.s); got != c.want {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
	cs := classify([]sample{{status: 409, code: "out_of_stock"}, {status: 201}, {status: 409, code: "out_of_stock"}, {status: 503, code: "lock_unavailable"}},
		func(sample) bool { return true })
	var got []string
	for _, c := range cs {
		got = append(got, c.Class)
	}
	if !slices.Equal(got, []string{"201", "409 out_of_stock", "503 lock_unavailable"}) {
		t.Errorf("classes in order %v: want sales first, then the most frequent", got)
	}
}
