package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/doctest"
	"github.com/zkstock/zkstock/internal/testenv"
)

// TestGaleraTutorial runs the steps of the pages that need the Galera cluster (tutorial 12) on a
// demo whose stock is on the cluster of make test-galera (scripts/servers.sh --galera); without
// one it skips, or fails when ZKSTOCK_GALERA=1 asked for it. The pages' other steps are
// TestTutorials'.
func TestGaleraTutorial(t *testing.T) {
	if os.Getenv("GALERA_NODES") == "" {
		if testenv.GaleraRequested() {
			t.Fatal("GALERA_NODES is not set but ZKSTOCK_GALERA=1 asked for the Galera cluster: it did not start (scripts/servers.sh --galera)")
		}
		t.Skip("GALERA_NODES is not set: run make test-galera")
	}
	root := repoRoot(t)
	demoDir := t.TempDir()
	up := exec.Command(filepath.Join(root, "scripts/demo.sh"), "up", demoDir)
	up.Env = append(os.Environ(), "DEMO_DB=galera")
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("demo up on Galera: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(filepath.Join(root, "scripts/demo.sh"), "down", demoDir).CombinedOutput(); err != nil {
			t.Logf("demo down: %v\n%s", err, out)
		}
	})
	pages, err := filepath.Glob(filepath.Join(root, "docs/tutorial/[0-9]*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sh := doctest.Shell{Dir: root, Env: []string{"DEMO_ENV=" + filepath.Join(demoDir, "env.sh")},
		Prelude: `source "$DEMO_ENV"`, Timeout: 2 * time.Minute}
	ran := 0
	for _, path := range append(pages, filepath.Join(root, "README.md")) {
		page, err := doctest.Parse(path)
		if err != nil {
			t.Fatal(err)
		}
		page = page.Only("galera")
		if len(page.Steps) == 0 {
			continue
		}
		ran++
		if !t.Run(filepath.Base(path), func(t *testing.T) { sh.RunPage(t, page) }) {
			break
		}
	}
	if ran == 0 {
		t.Fatal("no page has steps that need the Galera cluster")
	}
}
