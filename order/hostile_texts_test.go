package order_test

import (
	"strings"
	"testing"

	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/testenv"
)

// Issue 50, finding 6: error texts carried the server's internals. The admin's mode switch and
// /readyz (which anyone may read) answered with the fleet's wrapped errors: "fleet: mode cannot
// run: member order2 cannot run \"redis-fenced\" (it runs [zk ...])", "fleet: the mode's version
// is not the one expected: it is 0, not 7", "not ready: fleet: fleet: mode cannot run: ...". Now
// each says what stopped the request in the API's words, and the log has the error.
func TestSwitchAndReadinessAnswersCarryNoInternals(t *testing.T) {
	rs := newCluster(t, 1, clusterOpts{})
	ordertest.Start(t, 1, ordertest.Options{DSN: rs[0].DSN, FirstNumber: 2, NoRedis: true})
	text := func(rep reply) string { s, _ := rep.body["error"].(string); return s }

	rep := admin(t, rs[0], "PUT", "/admin/lock-mode", `{"mode":"redis-fenced"}`)
	if rep.status != 409 || rep.code() != "mode_unavailable" || !strings.Contains(text(rep), `member order2 cannot run "redis-fenced" (it runs zk, `) {
		t.Errorf("a switch to a mode order2 cannot run: %d %s, want 409 mode_unavailable naming order2 and what it runs", rep.status, rep.raw)
	}
	checkNoInternals(t, "mode_unavailable", text(rep))

	rep = admin(t, rs[0], "PUT", "/admin/lock-mode", `{"mode":"db-cas","version":7}`)
	if rep.status != 409 || rep.code() != "version_conflict" || !strings.Contains(text(rep), "at version 0, not 7") {
		t.Errorf("a switch from a version the mode is not at: %d %s, want 409 version_conflict naming both versions", rep.status, rep.raw)
	}
	checkNoInternals(t, "version_conflict", text(rep))

	// A replica without Redis in a fleet that runs redis: not ready, saying why in its own words.
	rs2 := newCluster(t, 1, clusterOpts{DSN: rs[0].DSN, Fleet: "other-" + testenv.UniqueName(t)})
	if rep := admin(t, rs2[0], "PUT", "/admin/lock-mode", `{"mode":"redis"}`); rep.status != 200 {
		t.Fatalf("switch: %d %s", rep.status, rep.raw)
	}
	late := ordertest.Start(t, 1, ordertest.Options{DSN: rs[0].DSN, Fleet: rs2[0].Fleet, FirstNumber: 9, NoRedis: true})[0]
	ready := call(t, "GET", late.URL+"/readyz", "")
	if ready.status != 503 || ready.code() != "not_ready" || !strings.Contains(text(ready), `the fleet runs mode "redis", which this replica cannot run (it runs zk, `) {
		t.Errorf("readyz of a replica that cannot run the fleet's mode: %d %s, want 503 not_ready saying so", ready.status, ready.raw)
	}
	checkNoInternals(t, "readyz", text(ready))
}
