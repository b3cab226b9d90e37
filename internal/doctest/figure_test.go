package doctest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func parseText(t *testing.T, text string) (Page, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return Parse(path)
}

const figurePage = "# A page\n\n" +
	"<!-- run -->\n```sh\nloadtest\n```\n" +
	"<!-- expect: sold -->\n" +
	`<!-- figure: out-at (?m)^out at (?P<s>[\d.]+) s$ ±50% -->` + "\n" +
	`<!-- figure: p99 (?m)^p99 (?P<ms>[\d.]+) ms$ -->` + "\n" +
	`<!-- figure: sold (?m)^sold ([\d,]+)$ -->` + "\n" +
	"\n```text\nsold 1,000\nout at 1.0 s\n```\n\n" +
	"It sold out at about 1.0 s<!-- =out-at -->, 0.6–2 s<!-- =out-at --> over runs; p99 2.5 s<!-- =p99 -->,\n" +
	"and 1,000<!-- =sold --> sold.\n"

func TestFiguresAreReadFromTheSampleAndTheMarks(t *testing.T) {
	p, err := parseText(t, figurePage)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 1 || len(p.Steps[0].Expects) != 1 || len(p.Steps[0].Figures) != 3 {
		t.Fatalf("steps %+v: want one step of one expectation and three figures", p.Steps)
	}
	fs := p.Steps[0].Figures
	want := map[string][]Writing{
		"out-at": {{13, "1.0", 1, 1}, {17, "1.0 s", 1, 1}, {17, "0.6–2 s", 0.6, 2}},
		"p99":    {{17, "2.5 s", 2500, 2500}},
		"sold":   {{13, "1,000", 1000, 1000}, {18, "1,000", 1000, 1000}},
	}
	for _, f := range fs {
		if len(f.Written) != len(want[f.Name]) {
			t.Errorf("figure %s written %+v, want %+v", f.Name, f.Written, want[f.Name])
			continue
		}
		for i, w := range f.Written {
			if w != want[f.Name][i] {
				t.Errorf("figure %s writing %d: %+v, want %+v", f.Name, i, w, want[f.Name][i])
			}
		}
	}
	if fs[0].Tol != (Tolerance{0.5, true}) || fs[1].Tol != DefaultTolerance || fs[1].Unit != "ms" {
		t.Errorf("tolerances %v %v, unit %q: want ±50%%, the default, ms", fs[0].Tol, fs[1].Tol, fs[1].Unit)
	}
}

func TestAFigureOffFromThePageFails(t *testing.T) {
	p, err := parseText(t, figurePage)
	if err != nil {
		t.Fatal(err)
	}
	outAt, p99, sold := p.Steps[0].Figures[0], p.Steps[0].Figures[1], p.Steps[0].Figures[2]
	for _, c := range []struct {
		f      Figure
		out    string
		failAt string // "" for a pass
	}{
		{outAt, "out at 1.4 s\n", ""},
		{outAt, "out at 0.6 s\n", ""},
		{outAt, "out at 1.6 s\n", `: "1.0" (line 13, ±50%), "1.0 s" (line 17, ±50%)`}, // past ±50%, in the range
		{outAt, "out at 0.55 s\n", `: "0.6–2 s" (line 17, a range)`},                  // in ±50%, not in the range
		{p99, "p99 2700.0 ms\n", ""},
		{p99, "p99 2800.0 ms\n", `: "2.5 s" (line 17, ±10%)`}, // the default ±10%
		{sold, "sold 1,050\n", ""},
		{sold, "sold 1,101\n", `: "1,000" (line 13, ±10%), "1,000" (line 18, ±10%)`},
		{sold, "none sold\n", "does not match"},
	} {
		run, err := c.f.Check(c.out)
		switch {
		case c.failAt == "" && err != nil:
			t.Errorf("%s on %q: %v, want a pass", c.f.Name, c.out, err)
		case c.failAt != "" && (err == nil || !strings.Contains(err.Error(), c.failAt)):
			t.Errorf("%s on %q (read %v): %v, want a failure naming %s", c.f.Name, c.out, run, err, c.failAt)
		}
	}
}

func TestABadFigureIsAParseError(t *testing.T) {
	step := "<!-- run -->\n```sh\ntrue\n```\n"
	for _, c := range []struct{ page, want string }{
		{step + "<!-- figure: x no-capture -->\n\nx 1<!-- =x -->\n", "want one"},
		{step + "<!-- figure: x (a)(b) -->\n\nx 1<!-- =x -->\n", "want one"},
		{step + "<!-- figure: x (\\d+) ±much -->\n\nx 1<!-- =x -->\n", "tolerance"},
		{step + "<!-- figure: x (?P<min>\\d+) -->\n\nx 1<!-- =x -->\n", "time unit"},
		{step + "<!-- figure: x (\\d+) -->\n\nnowhere\n", "neither in the step's sample"},
		{step + "<!-- figure: x (\\d+) -->\n\nx 1<!-- =y -->\n", "no <!-- figure: --> line"},
		{step + "<!-- figure: x (\\d+) -->\n\nx 1<!-- =x --> and <!-- =x -->\n", "follows no number"},
		{step + "<!-- figure: x (\\d+) -->\n\nx 1 s<!-- =x -->\n", "name its capture"},
		{step + "<!-- figure: x (\\d+) -->\n" + step + "<!-- figure: x (\\d+) -->\n\n1<!-- =x -->\n", "a second figure"},
	} {
		if _, err := parseText(t, c.page); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("page\n%s: %v, want an error saying %q", c.page, err, c.want)
		}
	}
}

func TestUntiedDropsTheMarkedFigures(t *testing.T) {
	got := Untied("sold out in 1.1 s<!-- =out -->, p99 2.4 ms, 0.8–1.6 s<!-- =out -->.")
	want := "sold out in " + strings.Repeat(" ", len("1.1 s<!-- =out -->")) + ", p99 2.4 ms, " +
		strings.Repeat(" ", len("0.8–1.6 s<!-- =out -->")) + "."
	if got != want {
		t.Errorf("Untied: %q, want %q", got, want)
	}
}

func TestTheSampleIsTheStepsFirstTextBlock(t *testing.T) {
	step := "<!-- run -->\n```sh\ntrue\n```\n<!-- figure: x (?m)^x (\\d+)$ -->\n"
	for _, c := range []struct {
		page string
		want int // writings of x
	}{
		{step + "\nYou will see:\n\n```text\nx 1\n```\n", 1},
		{step + "\n## Next\n\n```text\nx 1\n```\n\nx 1<!-- =x -->\n", 1},                        // past a heading: not its sample
		{step + "\n```sh\nx 1\n```\n\n```text\nx 1\n```\n\nx 1<!-- =x -->\n", 1},                // the first block is not text
		{step + "\n<!-- run -->\n```sh\ntrue\n```\n\n```text\nx 1\n```\n\nx 1<!-- =x -->\n", 1}, // the next step's
		{step + "\n```text\nx 1\n```\n\nx 2<!-- =x --> here, 1–3<!-- =x --> in runs\n", 3},      // the sample and two marks
	} {
		p, err := parseText(t, c.page)
		if err != nil {
			t.Errorf("page\n%s: %v", c.page, err)
			continue
		}
		if got := len(p.Steps[0].Figures[0].Written); got != c.want {
			t.Errorf("page\n%s: x written %d times (%+v), want %d", c.page, got, p.Steps[0].Figures[0].Written, c.want)
		}
	}
}
