package dlock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dlockNeeds is every module a program that imports dlock and dlock/fleet may have in its graph:
// dlock's one requirement, go-zookeeper, and nothing of the service's (gin, gorm, chromedp, ...).
var dlockNeeds = []string{"github.com/go-zookeeper/zk", "github.com/zkstock/zkstock/dlock"}

// A module that imports dlock (through a replace to this directory, as one that fetched it with
// go get would) has only what dlock needs in its module graph, and it builds and vets under the
// go line dlock's go.mod declares: the compiler holds the code to that language version, and
// vet's stdversion check holds it to that version's standard library.
func TestConsumerModuleNeedsOnlyGoZookeeper(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go toolchain: %v", err)
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	goLine := modGoLine(t, filepath.Join(here, "go.mod"))
	sums, err := os.ReadFile(filepath.Join(here, "go.sum")) // the checksums go get would add
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/consumer\n\ngo " + goLine + "\n\n" +
			"require github.com/zkstock/zkstock/dlock v0.0.0\n\n" +
			"replace github.com/zkstock/zkstock/dlock => " + here + "\n",
		"main.go": `package main

import (
	"context"
	"fmt"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/fleet"
)

func main() {
	_, err := dlock.Connect(context.Background(), []string{"127.0.0.1:2181"})
	fmt.Println(err, fleet.AnyVersion)
}
`,
		"go.sum": string(sums),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		// Only the module cache: what dlock needs is there (this module's own tests built it), and a
		// requirement that is not must fail the test, not be fetched.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	var got []string
	for _, line := range strings.Fields(run("list", "-m", "-f", "{{.Path}}", "all")) {
		if line != "example.com/consumer" {
			got = append(got, line)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, dlockNeeds) {
		t.Errorf("the consumer's module graph is %v, want only %v", got, dlockNeeds)
	}
	run("build", "./...")
	run("vet", ".", "github.com/zkstock/zkstock/dlock/...")
}

// modGoLine is the version of the go line of the go.mod at path.
func modGoLine(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s has no go line", path)
	return ""
}
