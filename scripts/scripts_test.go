// Package scripts holds no Go code: its test checks what the shell scripts promise a newcomer,
// without servers: which Debian packages the demo installs, what make says about an old Go, and who
// make demo-up and make compose-up say holds a taken port.
package scripts_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func run(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("./"+name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func lines(s string) []string { return strings.Fields(s) }

// The tests' peer libraries and the JDK that compiles against them.
var testOnly = []string{"libcurator-recipes-java", "default-jdk-headless", "python3-kazoo"}

// The servers the demo runs: ZooKeeper (and a JRE), MariaDB, Redis.
var demoServers = []string{"zookeeper", "mariadb-server", "default-jre-headless", "redis-server"}

// TestDemoInstallsOnlyWhatItRuns: make demo (scripts/demo.sh) installs the servers it runs and curl,
// never the tests' JDK, Curator or kazoo; make test's servers still get all of them.
func TestDemoInstallsOnlyWhatItRuns(t *testing.T) {
	out, err := run(t, nil, "demo.sh", "packages")
	if err != nil {
		t.Fatalf("demo.sh packages: %v\n%s", err, out)
	}
	demo := lines(out)
	for _, p := range append([]string{"curl"}, demoServers...) {
		if !slices.Contains(demo, p) {
			t.Errorf("the demo does not install %s, which it runs: %v", p, demo)
		}
	}
	for _, p := range testOnly {
		if slices.Contains(demo, p) {
			t.Errorf("the demo installs %s, which only the tests use: %v", p, demo)
		}
	}
	out, err = run(t, nil, "servers.sh", "packages")
	if err != nil {
		t.Fatalf("servers.sh packages: %v\n%s", err, out)
	}
	all := lines(out)
	for _, p := range append(demoServers, testOnly...) {
		if !slices.Contains(all, p) {
			t.Errorf("make test's servers do not install %s: %v", p, all)
		}
	}
}

// fakeGo writes a go command that reports the given version.
func fakeGo(t *testing.T, version string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "go")
	script := "#!/bin/sh\necho 'go version go" + version + " linux/amd64'\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheckGo: an older Go (Debian 12's 1.19, or one just below go.mod's) is refused with a message
// naming the version needed and the one found; go.mod's own version and newer ones pass.
func TestCheckGo(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, l := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			want = strings.TrimSpace(v)
		}
	}
	if want == "" {
		t.Fatal("go.mod has no go line")
	}
	for _, v := range []string{"1.19.8", "1.26.7", "1.9.99"} {
		out, err := run(t, []string{"GO=" + fakeGo(t, v)}, "check-go.sh")
		if err == nil {
			t.Errorf("Go %s passed the check, go.mod asks for %s", v, want)
		}
		if !strings.Contains(out, "needs Go "+want) || !strings.Contains(out, "is Go "+v) {
			t.Errorf("Go %s: the message does not name both versions:\n%s", v, out)
		}
	}
	for _, v := range []string{want, "1.26.10", "1.27.0", "2.0.0"} {
		if out, err := run(t, []string{"GO=" + fakeGo(t, v)}, "check-go.sh"); err != nil {
			t.Errorf("Go %s refused, go.mod asks for %s: %v\n%s", v, want, err, out)
		}
	}
	out, err := run(t, []string{"GO=no-such-go-command"}, "check-go.sh")
	if err == nil || !strings.Contains(out, "no 'no-such-go-command' command") {
		t.Errorf("a missing go command: %v\n%s", err, out)
	}
}

// TestGaleraPackages: --galera adds what a Galera cluster needs (the provider, mariabackup and
// socat for state transfers), and nothing asks for them without it.
func TestGaleraPackages(t *testing.T) {
	galera := []string{"galera-4", "mariadb-backup", "socat"}
	out, err := run(t, nil, "servers.sh", "packages", "--galera")
	if err != nil {
		t.Fatalf("servers.sh packages --galera: %v\n%s", err, out)
	}
	with := lines(out)
	out, err = run(t, nil, "servers.sh", "packages")
	if err != nil {
		t.Fatalf("servers.sh packages: %v\n%s", err, out)
	}
	without := lines(out)
	for _, p := range galera {
		if !slices.Contains(with, p) {
			t.Errorf("servers.sh --galera does not install %s: %v", p, with)
		}
		if slices.Contains(without, p) {
			t.Errorf("servers.sh without --galera installs %s: %v", p, without)
		}
	}
}

// TestDemoOnGaleraInstallsTheCluster: DEMO_DB=galera (make demo DB=galera) adds the cluster's
// packages to the demo's, and an unknown DEMO_DB is refused with a usage message.
func TestDemoOnGaleraInstallsTheCluster(t *testing.T) {
	out, err := run(t, []string{"DEMO_DB=galera"}, "demo.sh", "packages")
	if err != nil {
		t.Fatalf("DEMO_DB=galera demo.sh packages: %v\n%s", err, out)
	}
	with := lines(out)
	for _, p := range append([]string{"galera-4", "mariadb-backup", "socat"}, demoServers...) {
		if !slices.Contains(with, p) {
			t.Errorf("the demo on Galera does not install %s: %v", p, with)
		}
	}
	out, err = run(t, []string{"DEMO_DB=postgres"}, "demo.sh", "packages")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(out, "DEMO_DB is mariadb (the default) or galera") {
		t.Errorf("DEMO_DB=postgres: %v, %q; want exit 2 naming the choices", err, out)
	}
}
