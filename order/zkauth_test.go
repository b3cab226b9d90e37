package order_test

import (
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
