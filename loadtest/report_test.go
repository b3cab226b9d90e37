package loadtest

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCommandLineLeavesTheAdminTokenOut(t *testing.T) {
	for _, args := range [][]string{
		{"loadtest", "-admin-token=s3cret", "-modes", "zk"},
		{"loadtest", "--admin-token=s3cret"},
		{"loadtest", "-admin-token", "s3cret", "-requests", "5"},
		{"loadtest", "--admin-token", "s3cret"},
	} {
		got := commandLine(args)
		if strings.Contains(got, "s3cret") || !strings.Contains(got, "REDACTED") {
			t.Errorf("%q recorded as %q", args, got)
		}
	}
	if got := commandLine([]string{"loadtest", "-modes", "none,zk", "-html", "a b.html"}); got != "loadtest -modes none,zk -html 'a b.html'" {
		t.Errorf("plain command recorded as %q", got)
	}
}

func TestReportJSONLeavesTheAdminTokenOut(t *testing.T) {
	r := Report{Command: commandLine([]string{"loadtest", "-admin-token=s3cret"}), Config: Config{AdminToken: "s3cret", Modes: []string{"zk"}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cret") {
		t.Fatalf("the report carries the admin token: %s", b)
	}
}
