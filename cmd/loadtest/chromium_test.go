package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/testenv"
)

// chromium runs headless Chromium with the flags this closed network needs.
func chromium(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	bin := testenv.Chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0", "--window-size=1200,1600"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

func TestHTMLReportRendersInChromium(t *testing.T) {
	rs := ordertest.Start(t, 3, ordertest.Options{WorkDelay: 2 * time.Millisecond})
	dir := t.TempDir()
	htmlPath := filepath.Join(dir, "report.html")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-targets", targets(rs), "-sku", "LT-HTML", "-stock", "20", "-requests", "120",
		"-concurrency", "30", "-modes", "none,zk", "-admin-token", ordertest.AdminToken, "-html", htmlPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	url := "file://" + htmlPath

	dom, logs := chromium(t, "--dump-dom", url)
	for _, want := range []string{`<table id="summary">`, "<svg", "mode none: stock and sales", "mode zk: stock and sales"} {
		if !strings.Contains(dom, want) {
			t.Fatalf("rendered page lacks %q", want)
		}
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") || strings.Contains(line, "Failed to load resource") {
			t.Fatalf("the page logged an error: %s", line)
		}
	}

	// Keep the screenshot where a person can look at it after the run.
	shotDir := os.Getenv("LOADTEST_SCREENSHOT_DIR")
	if shotDir == "" {
		shotDir = filepath.Join("..", "..", "out")
	}
	if err := os.MkdirAll(shotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot, err := filepath.Abs(filepath.Join(shotDir, "report-screenshot.png"))
	if err != nil {
		t.Fatal(err)
	}
	chromium(t, "--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width != 1200 {
		t.Fatalf("screenshot is not a 1200-pixel-wide PNG: %+v %v", cfg, err)
	}
	t.Logf("screenshot: %s", shot)
}
