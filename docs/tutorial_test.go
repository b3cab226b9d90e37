// Package docs holds no code: its test runs the commands of the tutorials, of the README's API
// walkthrough and of make demo against local processes, so that the docs stay true.
package docs_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, "ZK_SERVERS", "MYSQL_DSN", "REDIS_ADDR") }

// step is one runnable block of a page: a ```sh block after <!-- run -->, and the
// <!-- expect: REGEXP --> lines after it.
type step struct {
	line    int
	script  string
	expects []*regexp.Regexp
}

var expectLine = regexp.MustCompile(`^<!-- expect: (.*) -->$`)

func parseSteps(t *testing.T, path string) []step {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	var steps []step
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "<!-- run -->" {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "```sh" {
			t.Fatalf("%s:%d: <!-- run --> must be followed by a ```sh block", path, i+1)
		}
		s := step{line: i + 2}
		j := i + 2
		for ; j < len(lines) && lines[j] != "```"; j++ {
			s.script += lines[j] + "\n"
		}
		for j++; j < len(lines); j++ {
			m := expectLine.FindStringSubmatch(lines[j])
			if m == nil {
				break
			}
			re, err := regexp.Compile(m[1])
			if err != nil {
				t.Fatalf("%s:%d: bad expectation: %v", path, j+1, err)
			}
			s.expects = append(s.expects, re)
		}
		steps = append(steps, s)
		i = j - 1
	}
	return steps
}

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// runScript runs a page's commands as a reader would type them, from the repository root, in a
// shell that has sourced the demo's env.sh.
func runScript(t *testing.T, root, envFile, script string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -e\nsource \"$DEMO_ENV\"\n"+script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DEMO_ENV="+envFile)
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

func TestTutorials(t *testing.T) {
	root := repoRoot(t)
	demoDir := t.TempDir()
	up := exec.Command(filepath.Join(root, "scripts/demo.sh"), "up", demoDir)
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("demo up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(filepath.Join(root, "scripts/demo.sh"), "down", demoDir).CombinedOutput(); err != nil {
			t.Logf("demo down: %v\n%s", err, out)
		}
	})
	pages, err := filepath.Glob(filepath.Join(root, "docs/tutorial/[0-9]*.md"))
	if err != nil || len(pages) < 4 {
		t.Fatalf("tutorial pages: %v %v", pages, err)
	}
	sort.Strings(pages)
	pages = append(pages, filepath.Join(root, "README.md"))
	for _, page := range pages {
		steps := parseSteps(t, page)
		if len(steps) == 0 {
			t.Fatalf("%s has no runnable commands", page)
		}
		ok := t.Run(filepath.Base(page), func(t *testing.T) {
			for _, s := range steps {
				out, err := runScript(t, root, filepath.Join(demoDir, "env.sh"), s.script, 2*time.Minute)
				if err != nil {
					t.Fatalf("line %d: %v\n--- commands\n%s--- output\n%s", s.line, err, s.script, out)
				}
				for _, re := range s.expects {
					if !re.MatchString(out) {
						t.Fatalf("line %d: output does not match %q\n--- commands\n%s--- output\n%s", s.line, re, s.script, out)
					}
				}
			}
		})
		if !ok {
			break // the demo's state is unknown now; later pages would fail for the wrong reason
		}
	}
}

// make demo runs end to end with its own servers, and its table shows both outcomes.
func TestMakeDemo(t *testing.T) {
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "demo", "DEMO_FLAGS=-requests 300 -stock 30 -concurrency 50")
	cmd.Dir = root
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ZK_SERVERS=") && !strings.HasPrefix(kv, "MYSQL_DSN=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
	none := regexp.MustCompile(`(?m)^\s*none\s+300\s+\d+\s+\d+\s+\d+\s+30\s+\d+\s+(\d+)\s+(\d+)`)
	zk := regexp.MustCompile(`(?m)^\s*zk\s+300\s+30\s+270\s+0\s+30\s+0\s+0\s+0\s+0\s`)
	m := none.FindStringSubmatch(string(out))
	if m == nil || (m[1] == "0" && m[2] == "0") {
		t.Fatalf("make demo's table does not show mode none overselling:\n%s", out)
	}
	if !zk.MatchString(string(out)) {
		t.Fatalf("make demo's table does not show mode zk exact:\n%s", out)
	}
	for _, f := range []string{"out/demo-report.html", "out/demo-report.json", "out/demo-table.md"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Fatalf("make demo did not write %s: %v", f, err)
		}
	}
}
