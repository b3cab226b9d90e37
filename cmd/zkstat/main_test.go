package main

import (
	"bytes"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/zkstock/zkstock/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, "ZK_ENSEMBLE") }

// The ensemble has exactly one leader; zkstat names it, and -leader prints that name alone.
func TestShowsTheEnsemblesLeader(t *testing.T) {
	ensemble := testenv.ZKEnsemble(t)
	args := []string{"zk1=" + ensemble[0], "zk2=" + ensemble[1], "zk3=" + ensemble[2]}
	var out, errOut bytes.Buffer
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	rows := regexp.MustCompile(`(?m)^(zk\d)\s+\S+\s+(leader|follower)\s+0x[0-9a-f]+\s+\d+\s+\d+$`).FindAllStringSubmatch(out.String(), -1)
	leaders := []string{}
	for _, r := range rows {
		if r[2] == "leader" {
			leaders = append(leaders, r[1])
		}
	}
	if len(rows) != 3 || len(leaders) != 1 {
		t.Fatalf("want 3 servers and 1 leader:\n%s", out.String())
	}
	out.Reset()
	if code := run(append([]string{"-leader"}, args...), &out, &errOut); code != 0 || strings.TrimSpace(out.String()) != leaders[0] {
		t.Fatalf("-leader: exit %d, printed %q, want %q", code, out.String(), leaders[0])
	}
}

// A server that does not answer is shown down; the run fails only when none answers.
func TestServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"gone=" + addr}, &out, &errOut); code != 1 || !regexp.MustCompile(`(?m)^gone\s+\S+\s+down\s`).MatchString(out.String()) {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	out.Reset()
	if code := run([]string{"gone=" + addr, "up=" + testenv.ZKEnsemble(t)[0]}, &out, &errOut); code != 0 ||
		!regexp.MustCompile(`(?m)^up\s+\S+\s+(leader|follower)\s`).MatchString(out.String()) {
		t.Fatalf("one of two down: exit %d:\n%s", code, out.String())
	}
	if code := run([]string{"-leader", addr}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no server leads") {
		t.Fatalf("-leader with none up: exit %d: %s", code, errOut.String())
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"x="}, {"=1.2.3.4:5"}, {"nohost"}, {"h:"}, {"-timeout", "x", "a:1"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage: zkstat") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut.String())
		}
	}
}
