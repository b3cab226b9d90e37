package nemesis

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/zkstock/zkstock/internal/svgchart"
	"github.com/zkstock/zkstock/lincheck"
)

// The anomalies a run counts. A control run must have at least one; any other run, none.
const (
	NonLinearizable = "non_linearizable" // a history Porcupine found impossible
	Undecided       = "undecided"        // a history Porcupine could not decide in time
	Oversold        = "oversold"         // units sold beyond the initial stock, summed over SKUs
	LostUpdates     = "lost_updates"     // units of deductions and of restocks overwritten, each way, summed
	NeverRecovered  = "never_recovered"  // a replica not ready, or not reading, once every fault was healed
	WrongAnswers    = "wrong_answers"    // 400s, or successes without the documented fields
	// BrokenPromises counts the changes whose answer a look-up after the run found untrue:
	// answered "nothing was changed" (internal/answers) and found made, the answer that makes a
	// client buy twice; or answered done and found not made, a sale the database lost.
	BrokenPromises = "broken_promises"
)

// Anomalies lists the anomaly kinds in the order a summary shows them.
var Anomalies = []string{NonLinearizable, Undecided, Oversold, LostUpdates, BrokenPromises, NeverRecovered, WrongAnswers}

// Summary is a run's summary.json.
type Summary struct {
	Seed      uint64  `json:"seed"`
	Mode      string  `json:"mode"`
	DB        string  `json:"db,omitempty"` // the database under the fleet: mariadb (one server) or galera
	DurationS float64 `json:"duration_s"`
	WallS     float64 `json:"wall_s"`
	// Ops counts the operations checked (after the unknown outcomes were resolved); Unknown the
	// answers of unknown outcome, of which Resolved were settled by a look-up.
	Ops      int `json:"ops"`
	Unknown  int `json:"unknown"`
	Resolved int `json:"resolved"`
	// Refused counts the changes answered "nothing was changed", each looked up by its key after
	// the run (BrokenPromises: found made, as are changes answered done found not made); those
	// answered out_of_stock are in Ops as well, the
	// others are not.
	Refused int `json:"refused"`
	// Retried counts the changes sent again under their key after an answer that promised them
	// nothing (a client that gave up, outcome_unknown, request_in_progress).
	Retried int `json:"retried,omitempty"`
	// Requests counts every request the clients sent or tried to (Ops, the refusals, failed
	// reads, requests not sent): the points of the timeline.
	Requests int `json:"requests"`
	// Faults counts the faults carried out per kind; Skipped those the run could not carry out
	// (a switch still waiting when the next came, a leader not found).
	Faults map[Kind]int `json:"faults"`
	// TookEffect counts, of Faults, those that took effect: a pause that stopped a COMMIT, a cut
	// that held back traffic, a slow link that traffic went through, a follower cut out of the
	// quorum, commits blocked while one waited, a switch the fleet made; a process killed,
	// stopped or restarted takes effect as it is made; a Galera node killed, cut off or paused
	// when it was a replica's writer (its links carried traffic just before), a power failure
	// while any database link did.
	TookEffect   map[Kind]int   `json:"took_effect"`
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
	LostUpdates  int64  `json:"lost_updates"` // LostDeductions + LostRestocks (inventory.Audit)
	// LostDeductions and LostRestocks: the units lost each way, which never cancel out.
	LostDeductions int64 `json:"lost_deductions"`
	LostRestocks   int64 `json:"lost_restocks"`
}

// Judge fills Caught and Passed from the anomalies.
func (s *Summary) Judge() {
	n := 0
	for _, k := range []string{NonLinearizable, Oversold, LostUpdates, BrokenPromises} {
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

// Op is one request on the timeline.
type Op struct {
	Start, End time.Time
	Class      string // PointClass: "ok", "refused", "unknown"
	What       string // for the tooltip: "buy 201"
}

// The classes of the timeline's points.
const (
	ClassOK      = "ok"      // done, as answered
	ClassRefused = "refused" // nothing changed: a refusal, out_of_stock, a failed read, a request not sent
	ClassUnknown = "unknown" // a change of unknown outcome: one of the summary's Unknown
)

// PointClass is the timeline's class of a request, from how the checker read its answer: unknown
// exactly when the checker counted it so (Summary.Unknown), ok when it was answered done.
func PointClass(o lincheck.Observation) string {
	switch {
	case o.InHistory && o.Result == lincheck.Unknown:
		return ClassUnknown
	case o.InHistory && o.Result == lincheck.OK:
		return ClassOK
	}
	return ClassRefused
}

// Window is a fault as it was carried out.
type Window struct {
	Kind       Kind
	Start, End time.Time
	What       string
}

// kindColors colour the fault windows, one per kind, in the order of Kinds and NamedKinds.
var kindColors = []string{"#e41a1c", "#984ea3", "#6a3d9a", "#377eb8", "#4daf4a", "#a6cee3", "#ff7f00", "#b2df8a",
	"#a65628", "#1b9e77", "#f781bf", "#999999", "#fb9a99", "#fdbf6f", "#8dd3c7",
	"#e7298a", "#bc80bd", "#66a61e", "#1f78b4", "#b15928"}

// KindColor is the colour of a kind's windows.
func KindColor(k Kind) string {
	if i := slices.Index(append(slices.Clone(Kinds), NamedKinds...), k); i >= 0 {
		return kindColors[i%len(kindColors)]
	}
	return "#cccccc"
}

// Timeline draws every request's latency over the run, with the fault windows shaded by kind; its
// title gives the summary's counts, and its legend the count of each class, which add up to
// sum.Requests (the unknown ones to sum.Unknown).
func Timeline(sum *Summary, t0 time.Time, ops []Op, windows []Window) string {
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
	for _, k := range append(slices.Clone(Kinds), NamedKinds...) {
		for _, w := range windows {
			if w.Kind == k {
				lanes = append(lanes, string(k))
				break
			}
		}
	}
	drawn, took := 0, 0
	for k, n := range sum.Faults {
		drawn, took = drawn+n, took+sum.TookEffect[k]
	}
	title := fmt.Sprintf("nemesis: %s, seed %d: %d requests, %d operations checked (%d unknown), %d refused; %d faults, %d took effect",
		sum.Mode, sum.Seed, sum.Requests, sum.Ops, sum.Unknown, sum.Refused, drawn, took)
	return string(svgchart.Timeline(title, pts, bands, lanes, []svgchart.Class{
		{Name: ClassOK, Color: "#2ca02c"}, {Name: ClassRefused, Color: "#1f77b4"}, {Name: ClassUnknown, Color: "#d62728"}}))
}
