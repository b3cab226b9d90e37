// Package doctest runs the commands of a Markdown page as a reader would type them, so that the
// docs stay true. A runnable step is a ```sh block after a <!-- run --> line; the
// <!-- expect: REGEXP --> lines after the block say what its output must show. A page that needs
// more than the local demo says so in a <!-- needs: WHAT --> line; a single step does so with
// <!-- run: WHAT --> instead of <!-- run -->.
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
		p.Steps = append(p.Steps, s)
		i = j - 1
	}
	return p, nil
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
	}
}

// tail keeps the end of a long output, which says how it ended.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
