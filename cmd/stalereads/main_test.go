package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// Bad usage is refused with exit 2 and a message naming what is wrong, before any connection.
func TestUsage(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	full := map[string]string{"MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/db", "MYSQL_NODES": "127.0.0.1:1,127.0.0.1:2"}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-sku", "S"}, map[string]string{"MYSQL_NODES": full["MYSQL_NODES"]}, "no DSN"},
		{[]string{"-sku", "S"}, map[string]string{"MYSQL_DSN": full["MYSQL_DSN"], "MYSQL_NODES": "127.0.0.1:1"}, "at least two nodes"},
		{nil, full, "-sku is required"},
		{[]string{"-sku", "S", "-n", "0"}, full, "-n must be at least 1"},
		{[]string{"-sku", "S", "extra"}, full, "unexpected arguments"},
		{[]string{"-sku", "S", "-dsn", "u:p@unix(/tmp/s)/db"}, full, "only a tcp(...) address"},
	} {
		var stderr strings.Builder
		if code := run(context.Background(), c.args, env(c.env), io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v with %v: exit %d, %q; want 2 and %q", c.args, c.env, code, stderr.String(), c.want)
		}
	}
}

// A usage message never shows the password MYSQL_DSN holds.
func TestUsageHidesTheDSN(t *testing.T) {
	env := map[string]string{"MYSQL_DSN": "u:s3cretPW@tcp(127.0.0.1:1)/db", "MYSQL_NODES": "127.0.0.1:1,127.0.0.1:2"}
	for _, args := range [][]string{nil, {"-h"}, {"-sku", "S", "-n", "0"}} {
		var stderr strings.Builder
		run(context.Background(), args, func(k string) string { return env[k] }, io.Discard, &stderr)
		if strings.Contains(stderr.String(), "s3cretPW") {
			t.Errorf("%v: the usage message shows the password:\n%s", args, stderr.String())
		}
	}
}
