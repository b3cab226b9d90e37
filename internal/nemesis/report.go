package nemesis

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/zkstock/zkstock/internal/svgchart"
)

// The anomalies a run counts. A control run must have at least one; any other run, none.
const (
	NonLinearizable = "non_linearizable" // a history Porcupine found impossible
	Undecided       = "undecided"        // a history Porcupine could not decide in time
	Oversold        = "oversold"         // units sold beyond the initial stock, summed over SKUs
	LostUpdates     = "lost_updates"     // units sold minus units taken from stock, summed
	NeverRecovered  = "never_recovered"  // a replica not ready, or not reading, once every fault was healed
	WrongAnswers    = "wrong_answers"    // 400s, or successes without the documented fields
)

// Anomalies lists the anomaly kinds in the order a summary shows them.
var Anomalies = []string{NonLinearizable, Undecided, Oversold, LostUpdates, NeverRecovered, WrongAnswers}

// Summary is a run's summary.json.
type Summary struct {
	Seed      uint64  `json:"seed"`
	Mode      string  `json:"mode"`
	DurationS float64 `json:"duration_s"`
	WallS     float64 `json:"wall_s"`
	// Ops counts the operations checked (after the unknown outcomes were resolved); Unknown the
	// answers of unknown outcome, of which Resolved were settled by a look-up.
	Ops      int `json:"ops"`
	Unknown  int `json:"unknown"`
	Resolved int `json:"resolved"`
	// Faults counts the faults carried out per kind; Skipped those the run could not carry out
	// (a switch still waiting when the next came, a leader not found).
	Faults       map[Kind]int   `json:"faults"`
	Skipped      map[Kind]int   `json:"skipped,omitempty"`
	Anomalies    map[string]int `json:"anomalies"`
	Linearizable bool           `json:"linearizable"`
	// Control: the mode is unsafe, and the run passes only if it caught it (Caught).
	Control bool `json:"control"`
	Caught  bool `json:"caught"`
	// Passed: a control caught, or a safe mode with no anomaly.
	Passed    bool           `json:"passed"`
	Answers   map[string]int `json:"answers"`
	Histories []HistoryRun   `json:"histories"`
	Audits    []Audit        `json:"audits"`
	Schedule  []Fault        `json:"schedule"`
	// Build is the commit the run was made on ("+dirty" when the tree had changes): a seed draws
	// from the kinds its build knows, so it replays its schedule on that build.
	Build string `json:"build"`
	// Reproduce is the command that runs the same schedule again, on Build.
	Reproduce string   `json:"reproduce"`
	Files     []string `json:"files,omitempty"`
	Notes     []string `json:"notes,omitempty"`
}

// HistoryRun is the check of one history (a pair of SKUs).
type HistoryRun struct {
	SKUs      [2]string `json:"skus"`
	Ops       int       `json:"ops"`
	Unknown   int       `json:"unknown"`
	Outcome   string    `json:"outcome"` // Porcupine's: Ok, Illegal, Unknown
	CheckTime float64   `json:"check_s"`
}

// Audit is one SKU's audit after the run.
type Audit struct {
	SKU          string `json:"sku"`
	InitialStock int64  `json:"initial_stock"`
	Stock        int64  `json:"stock"`
	UnitsSold    int64  `json:"units_sold"`
	Oversold     int64  `json:"oversold"`
	LostUpdates  int64  `json:"lost_updates"`
}

// Judge fills Caught and Passed from the anomalies.
func (s *Summary) Judge() {
	n := 0
	for _, k := range []string{NonLinearizable, Oversold, LostUpdates} {
		n += s.Anomalies[k]
	}
	s.Caught = n > 0
	if s.Control {
		s.Passed = s.Caught
		return
	}
	s.Passed = true
	for _, v := range s.Anomalies {
		if v > 0 {
			s.Passed = false
		}
	}
}

// Write saves the summary as summary.json in dir.
func (s *Summary) Write(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("nemesis: summary: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("nemesis: summary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("nemesis: summary: %w", err)
	}
	return nil
}

// Op is one operation on the timeline.
type Op struct {
	Start, End time.Time
	Class      string // "ok", "refused" (a clean refusal: out of stock, 503), "unknown"
	What       string // for the tooltip: "buy 201"
}

// Window is a fault as it was carried out.
type Window struct {
	Kind       Kind
	Start, End time.Time
	What       string
}

// kindColors colour the fault windows, one per kind, in the order of Kinds.
var kindColors = []string{"#e41a1c", "#984ea3", "#6a3d9a", "#377eb8", "#4daf4a", "#a6cee3", "#ff7f00", "#b2df8a",
	"#a65628", "#1b9e77", "#f781bf", "#999999", "#fb9a99", "#fdbf6f"}

// KindColor is the colour of a kind's windows.
func KindColor(k Kind) string {
	if i := slices.Index(Kinds, k); i >= 0 {
		return kindColors[i%len(kindColors)]
	}
	return "#cccccc"
}

// Timeline draws the operations' latency over the run, with the fault windows shaded by kind.
func Timeline(title string, t0 time.Time, ops []Op, windows []Window) string {
	var pts []svgchart.TimePoint
	for _, o := range ops {
		pts = append(pts, svgchart.TimePoint{X: o.Start.Sub(t0).Seconds(), Latency: o.End.Sub(o.Start).Seconds(), Class: o.Class, Title: o.What})
	}
	var bands []svgchart.Band
	for _, w := range windows {
		bands = append(bands, svgchart.Band{Lane: string(w.Kind), From: w.Start.Sub(t0).Seconds(), To: w.End.Sub(t0).Seconds(),
			Color: KindColor(w.Kind), Title: w.What})
	}
	var lanes []string
	for _, k := range Kinds {
		for _, w := range windows {
			if w.Kind == k {
				lanes = append(lanes, string(k))
				break
			}
		}
	}
	return string(svgchart.Timeline(title, pts, bands, lanes, []svgchart.Class{
		{Name: "ok", Color: "#2ca02c"}, {Name: "refused", Color: "#1f77b4"}, {Name: "unknown", Color: "#d62728"}}))
}
