// Package doctest runs the commands of a Markdown page as a reader would type them, so that the
// docs stay true. A runnable step is a ```sh block after a <!-- run --> line; the
// <!-- expect: REGEXP --> lines after the block say what its output must show. A page that needs
// more than the local demo says so in a <!-- needs: WHAT --> line; a single step does so with
// <!-- run: WHAT --> instead of <!-- run -->.
//
// A figure ties a number the page writes to the run. Among the expect lines,
//
//	<!-- figure: NAME REGEXP ±TOL -->
//
// names the number that REGEXP's one capture finds in the step's output (a capture named by its
// time unit, (?P<ms>...), lets the text write it in s). The page writes the figure in two ways:
// in the step's sample output (the first code block after the step, if it is a ```text block
// before the next heading or step), where REGEXP matches it; and in its text, as the number or
// range just before a mark, "sold out at 1.1 s<!-- =NAME -->" or "0.8–1.6 s<!-- =NAME -->" (a
// unit may stand between; GitHub shows the mark as nothing). The step fails when the run's
// figure is farther than TOL from a value written, or outside a range written (a range is its
// own tolerance). TOL is ±N% of the page's figure or ±N in the capture's unit; ±10% when left
// out (DefaultTolerance), for a count or a rate that the command sets. A timing needs a wide
// tolerance or a range of its own: on 2 shared cores a p99 varies 2–5× between runs. A figure no
// run here makes (a benchmark's, a cluster's) is stated with the command and the date it came
// from; docs/check flags a measured time in a chapter that is neither tied nor dated.
package doctest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Step is one runnable block of a page.
type Step struct {
	Line    int    // of the block's first command, for messages
	Needs   string // "" for the local demo
	Script  string
	Expects []*regexp.Regexp
	Figures []Figure
}

var (
	expectLine = regexp.MustCompile(`^<!-- expect: (.*) -->$`)
	needsLine  = regexp.MustCompile(`^<!-- needs: (.*) -->$`)
	runLine    = regexp.MustCompile(`^<!-- run(?:: (.*))? -->$`)
)

// Page is a page's steps and what it needs.
type Page struct {
	Path  string
	Needs string // "" for the local demo
	Steps []Step
}

// Only is the page with only the steps that need what is named ("" for the local demo).
func (p Page) Only(needs string) Page {
	q := p
	q.Steps = nil
	for _, s := range p.Steps {
		if s.Needs == needs {
			q.Steps = append(q.Steps, s)
		}
	}
	return q
}

// Parse reads a page.
func Parse(path string) (Page, error) {
	f, err := os.Open(path)
	if err != nil {
		return Page{}, fmt.Errorf("doctest: %w", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return Page{}, fmt.Errorf("doctest: read %s: %w", path, err)
	}
	p := Page{Path: path}
	for i := 0; i < len(lines); i++ {
		if m := needsLine.FindStringSubmatch(lines[i]); m != nil {
			p.Needs = m[1]
			continue
		}
		run := runLine.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if run == nil {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "```sh" {
			return Page{}, fmt.Errorf("doctest: %s:%d: <!-- run --> must be followed by a ```sh block", path, i+1)
		}
		s := Step{Line: i + 2, Needs: p.Needs}
		if run[1] != "" {
			s.Needs = run[1]
		}
		j := i + 2
		for ; j < len(lines) && lines[j] != "```"; j++ {
			s.Script += lines[j] + "\n"
		}
		for j++; j < len(lines); j++ {
			if m := figureLine.FindStringSubmatch(lines[j]); m != nil {
				f, err := parseFigure(m, j+1)
				if err != nil {
					return Page{}, fmt.Errorf("doctest: %s:%d: %w", path, j+1, err)
				}
				s.Figures = append(s.Figures, f)
				continue
			}
			m := expectLine.FindStringSubmatch(lines[j])
			if m == nil {
				break
			}
			re, err := regexp.Compile(m[1])
			if err != nil {
				return Page{}, fmt.Errorf("doctest: %s:%d: bad expectation: %w", path, j+1, err)
			}
			s.Expects = append(s.Expects, re)
		}
		if sample, line, ok := sampleAfter(lines, j); ok {
			for k := range s.Figures {
				if err := s.Figures[k].sampled(sample, line); err != nil {
					return Page{}, fmt.Errorf("doctest: %s:%d: %w", path, line, err)
				}
			}
		}
		p.Steps = append(p.Steps, s)
		i = j - 1
	}
	if err := p.markFigures(lines); err != nil {
		return Page{}, fmt.Errorf("doctest: %s: %w", path, err)
	}
	return p, nil
}

// sampleAfter is the output the page shows for the step whose lines end before line j: the first
// code block from there, if it is a ```text block that comes before the next heading or step.
// line is its first line's number.
func sampleAfter(lines []string, j int) (sample string, line int, ok bool) {
	for ; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
		if strings.HasPrefix(lines[j], "#") || runLine.MatchString(strings.TrimSpace(lines[j])) {
			return "", 0, false
		}
	}
	if j >= len(lines) || lines[j] != "```text" {
		return "", 0, false
	}
	var b strings.Builder
	for k := j + 1; k < len(lines) && lines[k] != "```"; k++ {
		b.WriteString(lines[k] + "\n")
	}
	return b.String(), j + 2, true
}

// markFigures adds the page's marks <!-- =NAME --> (outside code blocks) to the figures they
// name, and fails for a mark of no figure and for a figure the page writes nowhere.
func (p *Page) markFigures(lines []string) error {
	figures := map[string]*Figure{}
	for i := range p.Steps {
		for k := range p.Steps[i].Figures {
			f := &p.Steps[i].Figures[k]
			if figures[f.Name] != nil {
				return fmt.Errorf("%d: a second figure %s", f.Line, f.Name)
			}
			figures[f.Name] = f
		}
	}
	fence := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if fence {
			continue
		}
		for _, m := range markRE.FindAllStringSubmatch(l, -1) {
			f := figures[m[4]]
			if f == nil {
				return fmt.Errorf("%d: a mark of figure %s, which no <!-- figure: --> line after a step defines", i+1, m[4])
			}
			if err := f.marked(m, i+1); err != nil {
				return fmt.Errorf("%d: %w", i+1, err)
			}
		}
		if n := strings.Count(l, "<!-- ="); n > len(markRE.FindAllString(l, -1)) {
			return fmt.Errorf("%d: a mark <!-- =NAME --> that follows no number", i+1)
		}
	}
	for _, f := range figures {
		if len(f.Written) == 0 {
			return fmt.Errorf("%d: figure %s is neither in the step's sample output nor marked in the text", f.Line, f.Name)
		}
	}
	return nil
}

// Shell is where a page's commands run: the directory (the repository root), the environment
// added to the test's own, and commands run before each step (sourcing an env file, say).
type Shell struct {
	Dir     string
	Env     []string
	Prelude string
	Timeout time.Duration // per step
}

// Run runs one step's commands in bash with set -e and returns what they printed.
func (sh Shell) Run(t testing.TB, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sh.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -e\n"+sh.Prelude+"\n"+script)
	cmd.Dir = sh.Dir
	cmd.Env = append(os.Environ(), sh.Env...)
	// Output goes to a file, not a pipe, so that a command the page leaves running in the
	// background (as a reader's shell would) does not hold the step open.
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	runErr := cmd.Run()
	out, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(out), runErr
}

// RunPage runs every step of the page in order and fails the test at the first step that fails
// or does not print what the page says it prints.
func (sh Shell) RunPage(t *testing.T, p Page) {
	t.Helper()
	if len(p.Steps) == 0 {
		t.Fatalf("%s has no runnable commands", p.Path)
	}
	for _, s := range p.Steps {
		out, err := sh.Run(t, s.Script)
		t.Logf("%s:%d printed:\n%s", p.Path, s.Line, tail(out, 4000))
		if err != nil {
			t.Fatalf("%s:%d: %v\n--- commands\n%s--- output\n%s", p.Path, s.Line, err, s.Script, out)
		}
		for _, re := range s.Expects {
			if !re.MatchString(out) {
				t.Fatalf("%s:%d: output does not match %q\n--- commands\n%s--- output\n%s", p.Path, s.Line, re, s.Script, out)
			}
		}
		// a figure off from the page fails the page, but the steps after it still run
		for _, f := range s.Figures {
			run, err := f.Check(out)
			if err != nil {
				t.Errorf("%s:%d: %v", p.Path, f.Line, err)
				continue
			}
			t.Logf("%s:%d: figure %s: the run shows %v%s; the page writes %s", p.Path, f.Line, f.Name, run, f.Unit, f.written())
		}
	}
}

// tail keeps the end of a long output, which says how it ended.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
