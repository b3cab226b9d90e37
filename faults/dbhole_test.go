package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/zkstock/zkstock/internal/tcpproxy"
	"github.com/zkstock/zkstock/internal/testenv"
)

// Scenario 12: the lock holder's database connection turns into a black hole during its COMMIT
// (the connection stays open, nothing arrives either way, and no reset ever comes), as when the
// database's host or the route to it dies. The holder must give up within a bound, answer
// either the truth or 503 outcome_unknown naming the key, release the SKU, and the SKU must sell
// again on every replica.
func TestHolderDatabaseBlackHoled(t *testing.T) { inEachMode(t, testHolderDatabaseBlackHoled) }

// holeBound: Open's read timeout (10 s) ends the wait for the COMMIT's answer; the server ends the
// stranded session 10 s after its last packet (wait_timeout), which rolls it back and frees its
// row locks, so the outcome can be learnt by then; a lock kept for an outcome that cannot be learnt
// is kept until CommitBound (11 s) after that. Two seconds more for the work and the answer.
const holeBound = 10*time.Second + 11*time.Second + 2*time.Second

func testHolderDatabaseBlackHoled(t *testing.T, mode string) {
	dsn := testenv.MySQLDatabase(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.NewMySQL(t, cfg.Addr)
	viaProxy := cfg.Clone()
	viaProxy.Addr = proxy.Addr()
	ensemble := testenv.ZKEnsemble(t)
	settings := []string{"WORK_DELAY=200ms", "LOCK_TIMEOUT=30s", "LOCK_MODE=" + mode}
	holder := startReplicas(t, 1, viaProxy.FormatDSN(), ensemble, settings...)[0]
	other := startReplicas(t, 1, dsn, ensemble, append(settings, "REPLICA_ID=order2")...)[0]
	other.name = "order2"
	sku := "F-HOLE"
	reset(t, other, sku, 1000)

	proxy.BlackHoleQuery(func(q string) bool { return strings.EqualFold(q, "COMMIT") })
	const key = "hole-1"
	type answer struct {
		status int
		body   map[string]any
		at     time.Time
	}
	got := make(chan answer, 1)
	sent := time.Now()
	go func() {
		st, m := call("POST", holder.url+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku), "Idempotency-Key", key)
		got <- answer{st, m, time.Now()}
	}()
	waitHolder(t, other, sku, "order1", 10*time.Second)
	b := startBuyers([]*replica{other}, sku, 2, 50*time.Millisecond)
	var a answer
	select {
	case a = <-got:
	case <-time.After(60 * time.Second):
		t.Fatal("the holder whose COMMIT went into a black hole did not answer within 60 s")
	}
	gaveUp := a.at.Sub(sent)
	code, _ := a.body["code"].(string)
	named, _ := a.body["request_id"].(string)
	t.Logf("the holder answered %d %s (request_id %q) %v after its purchase began", a.status, code, named, gaveUp.Round(time.Millisecond))
	if gaveUp > holeBound {
		t.Errorf("the holder answered after %v, more than the bound %v", gaveUp, holeBound)
	}
	if a.status >= 500 && a.status != 503 {
		t.Errorf("the holder answered %d %s: only a clean 503 is allowed", a.status, code)
	}
	if a.status == 503 && code == "outcome_unknown" && named != key {
		t.Errorf("503 outcome_unknown names %q, not the purchase's key %q", named, key)
	}

	// The SKU sells again: on the other replica, and on the holder, over new connections.
	other1 := b.waitSale(t, sent, 30*time.Second, "on the other replica after the black hole")
	var again int
	var againBody map[string]any
	for i := 0; i < 50; i++ {
		again, againBody = call("POST", holder.url+"/v1/orders", fmt.Sprintf(`{"sku":%q,"qty":1}`, sku), "Idempotency-Key", fmt.Sprintf("after-%d", i))
		if again == 201 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	outcomes := b.halt()
	if again != 201 {
		t.Fatalf("the holder does not sell again: %d %v", again, againBody)
	}

	// The key's outcome is known by now (CommitBound has passed), and agrees with the answer.
	st, m := call("GET", holder.url+"/v1/orders?request_id="+key, "")
	sold := st == 200
	if st != 200 && st != 404 {
		t.Fatalf("look-up of %s: %d %v", key, st, m)
	}
	switch {
	case a.status == 201 && !sold:
		t.Errorf("%s was answered 201 but no order exists", key)
	case a.status != 201 && a.status != 200 && code != "outcome_unknown" && sold:
		t.Errorf("%s was answered %d %s (nothing sold) but its order exists", key, a.status, code)
	}
	outcomes[key] = outcome{status: a.status, code: code}
	if a.status == 503 && code == "outcome_unknown" {
		outcomes[key] = outcome{status: 0} // answered "may have sold": the verdict's cut connection
	}
	audit, codes := verdict(t, dsn, sku, outcomes, true)
	stall := other1.Sub(sent)
	t.Logf("order2 sold again %v after the purchase began; answers %v; key sold: %v; audit %+v", stall.Round(time.Millisecond), codes, sold, audit)
	fate := "not sold"
	if sold {
		fate = "sold"
	}
	record(reliabilityRow{"12. holder's database connection black-holed during COMMIT (" + mode + ")",
		"TCP proxy swallows the holder's COMMIT, then passes nothing either way and never closes (2 buyers on another replica)",
		fmt.Sprintf("the holder gave up and answered %d %s %.1f s after the purchase began; its key was %s (looked up afterwards); the server rolled the stranded session back at its wait_timeout; both replicas sold again",
			a.status, code, gaveUp.Seconds(), fate),
		fmt.Sprintf("%.1f s until the other replica sold", stall.Seconds()), fmtAudit(audit)})
}
