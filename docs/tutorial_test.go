// Package docs holds no code: its test runs the commands of the tutorials, of the API page's
// walkthrough (docs/api.md) and of make demo against local processes, so that the docs stay true.
package docs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/doctest"
	"github.com/zkstock/zkstock/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, "ZK_SERVERS", "MYSQL_DSN", "REDIS_ADDR") }

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
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
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "docs/api.md"))
	sh := doctest.Shell{Dir: root, Env: []string{"DEMO_ENV=" + filepath.Join(demoDir, "env.sh")},
		Prelude: `source "$DEMO_ENV"`, Timeout: 2 * time.Minute}
	for _, path := range pages {
		page, err := doctest.Parse(path)
		if err != nil {
			t.Fatal(err)
		}
		page = page.Only("") // steps on Docker have a test of their own: composetest
		if len(page.Steps) == 0 {
			continue
		}
		if !t.Run(filepath.Base(path), func(t *testing.T) { sh.RunPage(t, page) }) {
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
