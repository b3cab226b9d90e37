package order_test

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkstock/zkstock/order"
)

func TestLoadConfigZooKeeperIdentity(t *testing.T) {
	dir := t.TempDir()
	files := 0
	file := func(content string) string {
		files++
		p := filepath.Join(dir, fmt.Sprintf("auth%d", files))
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		vars  map[string]string
		args  []string
		want  order.ZKAuth
		open  bool
		error string // in the error, or "" for none
	}{
		{vars: map[string]string{"ZK_AUTH": "zkstock:s3cret"}, want: order.ZKAuth{User: "zkstock", Password: "s3cret"}},
		{vars: map[string]string{"ZK_AUTH": "zkstock:a:b"}, want: order.ZKAuth{User: "zkstock", Password: "a:b"}},
		{args: []string{"-zk-auth", "u:p"}, vars: map[string]string{"ZK_OPEN_ACL": "false"}, want: order.ZKAuth{User: "u", Password: "p"}},
		{vars: map[string]string{"ZK_AUTH_FILE": file("zkstock:from-file\n")}, want: order.ZKAuth{User: "zkstock", Password: "from-file"}},
		{vars: map[string]string{"ZK_AUTH_FILE": file("zkstock:crlf\r\n")}, want: order.ZKAuth{User: "zkstock", Password: "crlf"}},
		{args: []string{"-zk-auth-file", file("zkstock:flag-file")}, vars: map[string]string{"ZK_OPEN_ACL": "false"}, want: order.ZKAuth{User: "zkstock", Password: "flag-file"}},
		{vars: map[string]string{"ZK_OPEN_ACL": "true"}, open: true},
		// Secure by default: no identity and no opt-out is refused.
		{vars: map[string]string{"ZK_OPEN_ACL": "false"}, error: "ZK_AUTH: zkstock's ZooKeeper identity is not set"},
		{vars: map[string]string{"ZK_AUTH": "zkstock:x", "ZK_AUTH_FILE": file("zkstock:y")}, error: "ZK_AUTH and ZK_AUTH_FILE are both set"},
		{vars: map[string]string{"ZK_AUTH": "zkstock:x", "ZK_OPEN_ACL": "true"}, error: "both set"},
		{vars: map[string]string{"ZK_AUTH": "zkstock"}, error: "ZK_AUTH: want user:password"},
		{vars: map[string]string{"ZK_AUTH": ":pw"}, error: "ZK_AUTH: want user:password"},
		{vars: map[string]string{"ZK_AUTH": "zkstock:"}, error: "ZK_AUTH: want user:password"},
		{vars: map[string]string{"ZK_AUTH_FILE": file("zkstock:two\nlines\n")}, error: "more than one line"},
		{vars: map[string]string{"ZK_AUTH_FILE": file("")}, error: "ZK_AUTH_FILE"},
		{vars: map[string]string{"ZK_AUTH_FILE": filepath.Join(dir, "missing")}, error: "ZK_AUTH_FILE"},
		{vars: map[string]string{"ZK_OPEN_ACL": "maybe"}, error: "ZK_OPEN_ACL"},
	} {
		c.vars["REPLICA_ID"] = "order1"
		cfg, err := order.LoadConfig(c.args, env(c.vars), io.Discard)
		switch {
		case c.error != "" && (err == nil || !strings.Contains(err.Error(), c.error)):
			t.Errorf("%v %v: error %v, want one with %q", c.vars, c.args, err, c.error)
		case c.error == "" && err != nil:
			t.Errorf("%v %v: %v", c.vars, c.args, err)
		case c.error == "" && (cfg.ZKAuth != c.want || cfg.ZKOpenACL != c.open):
			t.Errorf("%v %v: identity %+v open %v, want %+v %v", c.vars, c.args, cfg.ZKAuth, cfg.ZKOpenACL, c.want, c.open)
		}
	}
}

func TestZKAuthHidesThePassword(t *testing.T) {
	a := order.ZKAuth{User: "zkstock", Password: "s3cret"}
	for _, s := range []string{a.String(), fmt.Sprint(a), fmt.Sprintf("%v", a), a.LogValue().String()} {
		if strings.Contains(s, "s3cret") || !strings.Contains(s, "zkstock") {
			t.Errorf("%q: want the user without the password", s)
		}
	}
}

// The command-line tools' -zk-auth flags never show the environment's identity in their usage,
// and still take it from there when not given.
func TestZKAuthFlagsHideTheEnvironment(t *testing.T) {
	getenv := func(k string) string { return map[string]string{"ZK_AUTH": "zkstock:zk-s3cret"}[k] }
	fs := flag.NewFlagSet("tool", flag.ContinueOnError)
	var usage strings.Builder
	fs.SetOutput(&usage)
	load := order.ZKAuthFlags(fs, getenv, "the tool's clients use")
	if err := fs.Parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if strings.Contains(usage.String(), "zk-s3cret") || !strings.Contains(usage.String(), "ZK_AUTH") {
		t.Errorf("usage:\n%s", usage.String())
	}
	if a, err := load(); err != nil || a.Password != "zk-s3cret" {
		t.Errorf("from the environment: %v, %v", a, err)
	}
	fs = flag.NewFlagSet("tool", flag.ContinueOnError)
	load = order.ZKAuthFlags(fs, getenv, "the tool's clients use")
	if err := fs.Parse([]string{"-zk-auth", "other:pw"}); err != nil {
		t.Fatal(err)
	}
	if a, err := load(); err != nil || a.User != "other" || a.Password != "pw" {
		t.Errorf("the flag: %v, %v", a, err)
	}
}
