// Package composetest runs the user's docker-compose.yml (and docker-compose.ensemble.yml,
// docker-compose.galera.yml) on a real Docker engine and breaks it: replicas killed, paused and
// cut off from ZooKeeper, the ZooKeeper leader killed, the Galera writer's node killed. The images
// come from scripts/compose/images.sh (no registry); the overrides scripts/compose/local*.yml
// change only where they come from.
//
// It runs under `make compose-test` (ZKSTOCK_COMPOSE=1); `make test` skips it. Under CI=true a
// Docker engine that does not answer fails the run.
package composetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv("ZKSTOCK_COMPOSE") != "1" {
		fmt.Fprintln(os.Stderr, "skipping package: the compose tests run under `make compose-test`")
		os.Exit(0)
	}
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("no Docker engine answers: %v %s", err, out)
		if testenv.InCI() {
			fmt.Fprintln(os.Stderr, "FAIL: "+msg)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "skipping package: "+msg)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// localOverrides are the local images' overrides of the user's override files (after
// scripts/compose/local.yml, which every stack has).
func localOverrides(userFiles []string) []string {
	var files []string
	for _, f := range userFiles {
		switch f {
		case "docker-compose.ensemble.yml":
			files = append(files, "scripts/compose/local.ensemble.yml")
		case "docker-compose.galera.yml":
			files = append(files, "scripts/compose/local.galera.yml")
		}
	}
	return files
}

// stack is one docker-compose project: the user's files plus the local images' override.
type stack struct {
	root    string
	project string
	files   []string
	upTook  time.Duration // from `up` until every service was healthy
}

func repoRoot(t testing.TB) string {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// newStack names a project of its own, brings it up, waits until every service is healthy and
// takes it down with its volumes when the test ends, whatever happened.
func newStack(t *testing.T, userFiles ...string) *stack {
	t.Helper()
	root := repoRoot(t)
	files := append([]string{}, userFiles...)
	files = append(files, "scripts/compose/local.yml")
	files = append(files, localOverrides(userFiles)...)
	s := &stack{root: root, project: "zkstocktest" + randHex(t, 4), files: files}
	if out, err := exec.Command(filepath.Join(root, "scripts/secrets.sh")).CombinedOutput(); err != nil {
		t.Fatalf("scripts/secrets.sh: %v\n%s", err, out)
	}
	token, err := os.ReadFile(filepath.Join(root, "secrets/admin_token"))
	if err != nil {
		t.Fatal(err)
	}
	adminToken = strings.TrimSpace(string(token))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := s.compose(context.Background(), "logs", "--no-color", "--tail", "40")
			t.Logf("logs of %s:\n%s", s.project, out)
		}
		if out, err := s.compose(context.Background(), "down", "-v", "--remove-orphans", "--timeout", "5"); err != nil {
			t.Errorf("down: %v\n%s", err, out)
		}
	})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := s.compose(ctx, "up", "-d", "--no-build"); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	s.waitHealthy(t, ctx, s.services(t)...)
	s.upTook = time.Since(start)
	t.Logf("%s: every service healthy %.1f s after up", s.project, s.upTook.Seconds())
	return s
}

func (s *stack) compose(ctx context.Context, args ...string) (string, error) {
	full := []string{"-p", s.project}
	for _, f := range s.files {
		full = append(full, "-f", f)
	}
	cmd := exec.CommandContext(ctx, "docker-compose", append(full, args...)...)
	cmd.Dir = s.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker-compose %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// services are the ones `up` starts (not the loadtest profile's).
func (s *stack) services(t testing.TB) []string {
	t.Helper()
	out, err := s.compose(context.Background(), "config", "--services")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range strings.Fields(out) {
		if n != "loadtest" {
			names = append(names, n)
		}
	}
	return names
}

// container is the service's container id.
func (s *stack) container(t testing.TB, service string) string {
	t.Helper()
	out, err := s.compose(context.Background(), "ps", "-q", service)
	id := strings.TrimSpace(out)
	if err != nil || id == "" {
		t.Fatalf("container of %s: %v %s", service, err, out)
	}
	return id
}

func (s *stack) health(t testing.TB, service string) string {
	out, err := exec.Command("docker", "inspect", "-f", "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}", s.container(t, service)).CombinedOutput()
	if err != nil {
		return "unknown: " + strings.TrimSpace(string(out))
	}
	return strings.TrimSpace(string(out))
}

// waitHealthy polls, since docker-compose 1.29 has no `up --wait`.
func (s *stack) waitHealthy(t testing.TB, ctx context.Context, services ...string) {
	t.Helper()
	for {
		var notYet []string
		for _, svc := range services {
			if h := s.health(t, svc); h != "healthy" {
				notYet = append(notYet, svc+" "+h)
			}
		}
		if len(notYet) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not healthy in time: %s", strings.Join(notYet, ", "))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func docker(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func randHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// call sends a JSON request to a published port and decodes the JSON answer.
func call(t testing.TB, method, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, map[string]any{"transport": err.Error()}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, map[string]any{"transport": err.Error()}
	}
	m := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, raw)
		}
	}
	return resp.StatusCode, m
}
