package doctest

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// DefaultTolerance is a figure's tolerance when its marker states none: ±10%, for a figure that
// should repeat from run to run (a count or a rate that the command sets, moved only by a few
// buyers more or less on either side of a moment). A timing states its own, wide tolerance: on
// the 2 shared cores the tests run on, one run's p99 is often 2–5× another's.
var DefaultTolerance = Tolerance{Value: 0.10, Relative: true}

// Tolerance is how far a run's figure may be from the page's: a fraction of the page's figure
// (±N%), or an amount in the unit of the figure's capture (±N).
type Tolerance struct {
	Value    float64
	Relative bool
}

func (tol Tolerance) String() string {
	if tol.Relative {
		return "±" + strconv.FormatFloat(tol.Value*100, 'f', -1, 64) + "%"
	}
	return "±" + strconv.FormatFloat(tol.Value, 'f', -1, 64)
}

func parseTolerance(s string) (Tolerance, error) {
	rel := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || v < 0 {
		return Tolerance{}, fmt.Errorf("tolerance ±%s: want ±N%% or ±N", s)
	}
	if rel {
		v /= 100
	}
	return Tolerance{Value: v, Relative: rel}, nil
}

// Figure is a number that a step's output shows and the page writes.
type Figure struct {
	Name string
	Line int            // of its marker
	Re   *regexp.Regexp // its one capture is the figure in the output
	Unit string         // "s", "ms" or "µs" when the capture group is named so, else ""
	Tol  Tolerance
	// Written is every place the page writes the figure: the step's sample output, where Re
	// matches it, and each mark <!-- =Name --> in the page.
	Written []Writing
}

// Writing is one place a page writes a figure, as a value or a range.
type Writing struct {
	Line   int
	Text   string  // as the page writes it: "0.79 s", "0.8–1.6 s"
	Lo, Hi float64 // in the figure's unit; Lo == Hi for a value
}

var (
	figureLine = regexp.MustCompile(`^<!-- figure: (\S+) (.+?)(?: ±(\S+))? -->$`)
	// a mark ties the number (or range) just before it to a figure; a unit may stand between
	markRE = regexp.MustCompile(`(\d[\d,]*(?:\.\d+)?)(?:(?: ?[–-] ?| to )(\d[\d,]*(?:\.\d+)?))?(?: ?([\pL%/]+))?<!-- =([\w.-]+) -->`)
)

// timeUnits are the units a capture group may be named by, in seconds.
var timeUnits = map[string]float64{"s": 1, "ms": 1e-3, "µs": 1e-6, "us": 1e-6}

func parseFigure(m []string, line int) (Figure, error) {
	f := Figure{Name: m[1], Line: line, Tol: DefaultTolerance}
	re, err := regexp.Compile(m[2])
	if err != nil {
		return f, fmt.Errorf("figure %s: %w", f.Name, err)
	}
	if re.NumSubexp() != 1 {
		return f, fmt.Errorf("figure %s: its regexp has %d captures, want one (the figure)", f.Name, re.NumSubexp())
	}
	f.Re = re
	if u := re.SubexpNames()[1]; u != "" {
		if _, ok := timeUnits[u]; !ok {
			return f, fmt.Errorf("figure %s: a capture is named by its time unit (s, ms, µs), not %q", f.Name, u)
		}
		f.Unit = u
	}
	if m[3] != "" {
		if f.Tol, err = parseTolerance(m[3]); err != nil {
			return f, fmt.Errorf("figure %s: %w", f.Name, err)
		}
	}
	return f, nil
}

func number(s string) (float64, error) {
	return strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
}

// sampled adds the figure as the step's sample output shows it, if it does.
func (f *Figure) sampled(sample string, line int) error {
	m := f.Re.FindStringSubmatch(sample)
	if m == nil {
		return nil
	}
	v, err := number(m[1])
	if err != nil {
		return fmt.Errorf("figure %s: the sample shows %q, not a number", f.Name, m[1])
	}
	f.Written = append(f.Written, Writing{Line: line, Text: m[1], Lo: v, Hi: v})
	return nil
}

// marked adds a mark's writing of the figure: m is a match of markRE.
func (f *Figure) marked(m []string, line int) error {
	lo, err := number(m[1])
	if err != nil {
		return err
	}
	hi := lo
	if m[2] != "" {
		if hi, err = number(m[2]); err != nil {
			return err
		}
	}
	if scale, ok := timeUnits[m[3]]; ok && f.Unit != "" {
		lo, hi = lo*scale/timeUnits[f.Unit], hi*scale/timeUnits[f.Unit]
	} else if ok && m[3] != f.Unit {
		return fmt.Errorf("figure %s is written in %s: name its capture by the unit of the output, (?P<ms>...) or (?P<s>...)", f.Name, m[3])
	}
	text := strings.TrimSuffix(m[0], "<!-- ="+f.Name+" -->")
	f.Written = append(f.Written, Writing{Line: line, Text: text, Lo: math.Min(lo, hi), Hi: math.Max(lo, hi)})
	return nil
}

// written is where the page writes the figure, and how near the run must be to each.
func (f Figure) written() string {
	var ws []string
	for _, w := range f.Written {
		within := f.Tol.String()
		if w.Lo < w.Hi {
			within = "a range"
		}
		ws = append(ws, fmt.Sprintf("%q (line %d, %s)", w.Text, w.Line, within))
	}
	return strings.Join(ws, ", ")
}

// Check reads the figure in a run's output and returns it, with an error if the output does not
// show it, or if the page writes it anywhere as a value farther from it than the tolerance or as a
// range that does not hold it.
func (f Figure) Check(out string) (float64, error) {
	m := f.Re.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("figure %s: the output does not match %q", f.Name, f.Re)
	}
	run, err := number(m[1])
	if err != nil {
		return 0, fmt.Errorf("figure %s: the output shows %q, not a number", f.Name, m[1])
	}
	far := f
	far.Written = nil
	for _, w := range f.Written {
		lo, hi := w.Lo, w.Hi
		switch {
		case lo < hi: // a range is its own tolerance
		case f.Tol.Relative:
			lo, hi = lo-math.Abs(lo)*f.Tol.Value, hi+math.Abs(hi)*f.Tol.Value
		default:
			lo, hi = lo-f.Tol.Value, hi+f.Tol.Value
		}
		if run < lo || run > hi {
			far.Written = append(far.Written, w)
		}
	}
	if len(far.Written) > 0 {
		return run, fmt.Errorf("figure %s: the run shows %s%s, out of what the page writes: %s",
			f.Name, m[1], f.Unit, far.written())
	}
	return run, nil
}

// Untied is the text with the figures tied to a run by a mark, and their marks, blanked out (the
// same number of bytes of spaces), for the checks that look for the figures that are not.
func Untied(s string) string {
	return markRE.ReplaceAllStringFunc(s, func(m string) string { return strings.Repeat(" ", len(m)) })
}
