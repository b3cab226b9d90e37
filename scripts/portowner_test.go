package scripts_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listenAs starts a process whose binary is dir/bin/NAME, listening on a free loopback port until
// the test ends, and returns the port: a stand-in for a demo's orderd, which `ss` names by its
// binary.
func listenAs(t *testing.T, dir, name string) int {
	t.Helper()
	src := t.TempDir()
	prog := "package main\n\nimport (\n\t\"net\"\n\t\"os\"\n\t\"time\"\n)\n\nfunc main() {\n\tl, err := net.Listen(\"tcp\", \"127.0.0.1:\"+os.Args[1])\n\tif err != nil {\n\t\tpanic(err)\n\t}\n\tdefer l.Close()\n\ttime.Sleep(time.Hour)\n}\n"
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module listener\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin", name)
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, fmt.Sprint(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %d", name, port)
		}
	}
}

// fakeDocker writes docker and docker-compose commands for a machine whose Docker engine answers
// with no container, or with the one named: `docker ps --filter publish=P` prints it. Nothing
// else is run; it stands in for a Docker that these tests may not use.
func fakeDocker(t *testing.T, container string) string {
	t.Helper()
	dir := t.TempDir()
	docker := "#!/bin/sh\ncase \"$1 $2\" in\n\"compose version\") exit 1 ;;\nesac\n" +
		"[ \"$1\" = ps ] && [ -n '" + container + "' ] && case \"$*\" in *-q*) echo 0123456789ab ;; *) echo '" + container + "' ;; esac\nexit 0\n"
	for name, script := range map[string]string{"docker": docker, "docker-compose": "#!/bin/sh\nexit 0\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return "PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// TestATakenPortNamesItsHolder: make demo-up and make compose-up both publish 8081..8083; each,
// finding a port taken, says which of the two holds it (a local demo's orderd, or a container of
// a compose project), and stops before it starts or builds anything.
func TestATakenPortNamesItsHolder(t *testing.T) {
	demoDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(demoDir, "servers.env"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	demoPort := listenAs(t, demoDir, "orderd")
	noContainer := fakeDocker(t, "")
	wantDemo := "a local demo: orderd pid "
	out, err := run(t, []string{noContainer}, "port-owner.sh", fmt.Sprint(demoPort))
	if err != nil || !strings.Contains(out, wantDemo) || !strings.Contains(out, demoDir) {
		t.Errorf("port-owner.sh on the demo's port: %v %q, want %q and its directory %s", err, out, wantDemo, demoDir)
	}
	// compose-up beside the demo
	ports := fmt.Sprintf("ORDER1_HOST_PORT=%d", demoPort)
	out, err = run(t, []string{noContainer, ports}, "compose/stack.sh", "up")
	if err == nil || !strings.Contains(out, fmt.Sprintf("port %d is in use by %s", demoPort, wantDemo)) {
		t.Errorf("compose up beside the demo: %v\n%s\nwant it refused, naming the demo", err, out)
	}
	if strings.Contains(out, "images:") {
		t.Errorf("compose up built images before it found the port taken:\n%s", out)
	}

	// demo-up beside a compose stack
	composePort := listenAs(t, t.TempDir(), "docker-proxy-stand-in")
	stack := fakeDocker(t, "zkstock-order1-1 zkstock")
	wantStack := "Docker: container zkstock-order1-1 of the Compose project zkstock (the compose stack: make compose-down"
	out, err = run(t, []string{stack, fmt.Sprintf("DEMO_PORTS=%d 1 2", composePort)}, "demo.sh", "up", t.TempDir())
	if err == nil || !strings.Contains(out, fmt.Sprintf("port %d is in use by %s", composePort, wantStack)) {
		t.Errorf("demo up beside the compose stack: %v\n%s\nwant it refused, naming the stack", err, out)
	}
	if strings.Contains(out, "servers:") {
		t.Errorf("demo up started servers before it found the port taken:\n%s", out)
	}
}
