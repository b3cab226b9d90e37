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

func TestTableNamesErrorCodesAndFalseRefusals(t *testing.T) {
	two, unknown := int64(2), (*int64)(nil)
	r := Report{Rows: []Row{
		{Mode: "zk", Requests: 10, Errors: 4, ErrorCodes: map[string]int{"sku_busy": 3, "lock_unavailable": 1}, FalseRefusals: &two},
		{Mode: "db-cas", Requests: 10, Errors: 1, ErrorCodes: map[string]int{"sku_busy": 1}, FalseRefusals: unknown},
		{Mode: "none", Requests: 10},
	}}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"zk: error answers by code: sku_busy 3, lock_unavailable 1\n",
		"zk: 3 purchases refused sku_busy; found false by the replicas (the queue would have served them within the budget): 2\n",
		"db-cas: 1 purchases refused sku_busy; found false by the replicas (the queue would have served them within the budget): unknown\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "none: error answers") || strings.Contains(out, "none: 0 purchases") {
		t.Errorf("a row without errors has notes:\n%s", out)
	}
}
