package order_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/answers"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/order"
)

// A retry is never told "nothing was changed" while an earlier attempt under its key may still
// commit. Reproduced as a careful client meets it: two replicas in zk, LOCK_TIMEOUT 3 s; the
// first attempt takes the lock on replica 1, and a database session then holds every COMMIT for
// 7 s (BACKUP STAGE BLOCK_COMMIT), so that its COMMIT waits; its client gives up at 1 s and sends the same
// request under the same key to replica 2, then again after each Retry-After, until an answer is
// final. Before the key was held fleet-wide the retry was answered 503 lock_unavailable ("nothing
// was sold") and the first attempt then committed. Every answer is held to its promise for a
// retry (internal/answers) once the block has lifted and the change's fate is in the database.
func TestARetryIsNeverToldNothingChangedWhileItsKeyMayCommit(t *testing.T) {
	for _, c := range []struct {
		name string
		// send is the change, under key, to replica r; made says whether the database holds it.
		send func(t *testing.T, r *replica, key string, timeout time.Duration) reply
		made func(t *testing.T, r *replica, key string) bool
		// before runs before the commits are held (the cancellation's purchase).
		before func(t *testing.T, r *replica, key string)
	}{
		{name: "purchase",
			send: func(t *testing.T, r *replica, key string, timeout time.Duration) reply {
				return send(t, timeout, r.URL+"/v1/orders", `{"sku":"RETRY-A","qty":1}`, key)
			},
			made: func(t *testing.T, r *replica, key string) bool { return orderUnder(t, r, key) },
		},
		{name: "cart",
			send: func(t *testing.T, r *replica, key string, timeout time.Duration) reply {
				return send(t, timeout, r.URL+"/v1/orders", `{"items":[{"sku":"RETRY-A","qty":1},{"sku":"RETRY-B","qty":2}]}`, key)
			},
			made: func(t *testing.T, r *replica, key string) bool { return orderUnder(t, r, key) },
		},
		{name: "cancellation",
			before: func(t *testing.T, r *replica, key string) {
				if rep := buy(t, r, "RETRY-A", 1, key); rep.status != 201 {
					t.Fatalf("the purchase to cancel: %s", rep.raw)
				}
			},
			send: func(t *testing.T, r *replica, key string, timeout time.Duration) reply {
				o, found, err := r.Store.OrderByRequestID(context.Background(), key)
				if err != nil || !found {
					t.Fatalf("the purchase to cancel: found %v, %v", found, err)
				}
				return send(t, timeout, fmt.Sprintf("%s/v1/orders/%d/cancel", r.URL, o.ID), fmt.Sprintf(`{"request_id":%q}`, key), "")
			},
			made: func(t *testing.T, r *replica, key string) bool {
				o, _, err := r.Store.OrderByRequestID(context.Background(), key)
				if err != nil {
					t.Fatal(err)
				}
				return o.CancelledAt != nil
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := testenv.MySQLDatabase(t)
			// 300 ms of work in the critical section: the commits are held once the first attempt
			// holds its key and its lock, so that its COMMIT, sent before its client gives up
			// (which would cancel the work), is what waits.
			rs := newCluster(t, 2, clusterOpts{Mode: order.ModeZK, DSN: dsn, LockTimeout: 3 * time.Second, WorkDelay: 300 * time.Millisecond})
			resetStock(t, rs[0], "RETRY-A", 5)
			resetStock(t, rs[0], "RETRY-B", 5)
			key := "retry-" + c.name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			if c.before != nil {
				c.before(t, rs[0], key)
			}
			first := make(chan reply, 1)
			go func() { first <- c.send(t, rs[0], key, time.Second) }()
			waitForHolder(t, rs[0], "RETRY-A")
			release := holdCommits(t, dsn)
			got := []reply{<-first} // the client gave up: no answer (status 0)
			for i := 1; ; i++ {
				rep := c.send(t, rs[i%2], key, 10*time.Second)
				got = append(got, rep)
				if answers.OfAttempt(rep.status, rep.code(), true) != answers.Unknown || i > 40 {
					break
				}
				pause := time.Second
				if s, err := strconv.Atoi(rep.header.Get("Retry-After")); err == nil {
					pause = time.Duration(s) * time.Second
				}
				time.Sleep(pause)
			}
			release()
			waitForNoCommit(t, dsn)
			made := c.made(t, rs[0], key)
			final := got[len(got)-1]
			t.Logf("made %v; answers %s", made, answerLines(got))
			if !made {
				t.Fatalf("the first attempt's COMMIT, held on the server, did not apply: the test missed its case (%s)", answerLines(got))
			}
			if answers.OfAttempt(final.status, final.code(), true) == answers.Unknown {
				t.Fatalf("no final answer after %d retries: %s", len(got)-1, answerLines(got))
			}
			for i, rep := range got[1:] {
				switch answers.OfAttempt(rep.status, rep.code(), true) {
				case answers.NotDone:
					if made {
						t.Errorf("retry %d was answered %s (nothing changed), and the change was made: %s", i+1, rep.codeLine(), rep.raw)
					}
				case answers.Done:
					if !made {
						t.Errorf("retry %d was answered %s, and the change is not in the database", i+1, rep.codeLine())
					}
				}
			}
			if rep := call(t, "GET", rs[1].URL+"/v1/orders?request_id="+key, ""); (rep.status == 200) != (c.name == "cancellation" || made) {
				t.Errorf("look-up by key after the retries: %s, made %v", rep.codeLine(), made)
			}
			for _, sku := range []string{"RETRY-A", "RETRY-B"} {
				if a := auditOf(t, rs[0], sku); a.Oversold != 0 || a.LostUpdates != 0 || a.Stock != a.InitialStock-a.UnitsSold {
					t.Errorf("audit of %s: %+v", sku, a)
				}
			}
		})
	}
}

// holdCommits holds every COMMIT on the test database's server until release (BACKUP STAGE
// BLOCK_COMMIT, on a session of its own), or for 7 s at the most; release is idempotent.
func holdCommits(t *testing.T, dsn string) (release func()) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BACKUP STAGE START", "BACKUP STAGE BLOCK_COMMIT"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-done:
		case <-time.After(7 * time.Second):
		}
		if _, err := conn.ExecContext(ctx, "BACKUP STAGE END"); err != nil {
			t.Errorf("BACKUP STAGE END: %v", err)
		}
		_ = conn.Close()
		_ = db.Close()
	}()
	var once bool
	release = func() {
		if !once {
			once = true
			close(done)
		}
		<-ended
	}
	t.Cleanup(release)
	return func() {
		if !once {
			once = true
			close(done)
		}
	}
}

// expireHolding makes key's holding expired by the database's clock, as a holding does whose
// replica was paused past it; the next attempt under the key takes it over.
func expireHolding(t *testing.T, dsn, key string) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec("UPDATE key_attempts SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE request_id = ?", key)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("no holding of key %q to expire", key)
	}
}

// waitForNoCommit waits until no COMMIT is executing on the server, for 30 s at the most.
func waitForNoCommit(t *testing.T, dsn string) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'COMMIT'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("a COMMIT was still executing 30 s after the commits were let through")
}

// send posts body to url under the key with a client that gives up after timeout: status 0 then.
func send(t *testing.T, timeout time.Duration, url, body, key string) reply {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return reply{raw: err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: string(raw), header: resp.Header}
	_ = json.NewDecoder(bytes.NewReader(raw)).Decode(&r.body)
	return r
}

// orderUnder says whether the database holds an order under key (a cart's head order).
func orderUnder(t *testing.T, r *replica, key string) bool {
	t.Helper()
	_, found, err := r.Store.OrderByRequestID(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func answerLines(rs []reply) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		if r.status == 0 {
			b.WriteString("no answer")
			continue
		}
		b.WriteString(r.codeLine())
	}
	return b.String()
}

// A retry of a change that an earlier attempt made is answered that change, before the fleet is
// asked to admit it: a replica that cannot run the fleet's mode (redis-fenced, without Redis)
// would refuse it "nothing was changed" (mode_unavailable) although the key's change was made.
func TestARetryOfAMadeChangeIsItsReplayBeforeAdmission(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	with := newCluster(t, 1, clusterOpts{Mode: order.ModeRedisFenced, DSN: dsn})[0]
	without := newCluster(t, 1, clusterOpts{Mode: order.ModeRedisFenced, DSN: dsn, NoRedis: true, FirstNumber: 2})[0]
	resetStock(t, with, "REPLAY-A", 5)
	resetStock(t, with, "REPLAY-B", 5)
	if rep := buy(t, without, "REPLAY-A", 1, "replay-new"); rep.code() != "mode_unavailable" {
		t.Fatalf("a new purchase on the replica without Redis: %s, want 503 mode_unavailable", rep.raw)
	}
	buyBody := `{"sku":"REPLAY-A","qty":1}`
	cartBody := `{"items":[{"sku":"REPLAY-A","qty":1},{"sku":"REPLAY-B","qty":1}]}`
	for _, c := range []struct{ name, body string }{{"purchase", buyBody}, {"cart", cartBody}} {
		key := "replay-" + c.name
		if rep := send(t, 10*time.Second, with.URL+"/v1/orders", c.body, key); rep.status != 201 {
			t.Fatalf("%s: %s", c.name, rep.raw)
		}
		if rep := send(t, 10*time.Second, without.URL+"/v1/orders", c.body, key); rep.status != 200 || rep.body["replayed"] != true {
			t.Errorf("%s retried on a replica that cannot run the fleet's mode: %d %s, want 200 replayed", c.name, rep.status, rep.raw)
		}
	}
	o, _, err := with.Store.OrderByRequestID(context.Background(), "replay-purchase")
	if err != nil {
		t.Fatal(err)
	}
	cancel := fmt.Sprintf("/v1/orders/%d/cancel", o.ID)
	body := `{"request_id":"replay-purchase"}`
	if rep := send(t, 10*time.Second, with.URL+cancel, body, ""); rep.status != 200 {
		t.Fatalf("cancellation: %s", rep.raw)
	}
	if rep := send(t, 10*time.Second, without.URL+cancel, body, ""); rep.status != 200 || rep.body["replayed"] != true {
		t.Errorf("cancellation retried on a replica that cannot run the fleet's mode: %d %s, want 200 replayed", rep.status, rep.raw)
	}
}

// A key held more than keyHoldWithin (2 s) after its request arrived (here a slow link to the
// database) tries nothing: a retry sent since may have been answered already. The same key on a
// quick link sells.
func TestAKeyHeldLateTriesNothing(t *testing.T) {
	r, proxy, direct := behindDBProxy(t, order.ModeZK)
	resetStock(t, r, "LATE-A", 10)
	proxy.SetDelay(1100 * time.Millisecond) // each way: the hold's round trip takes 2.2 s or more
	late := buy(t, r, "LATE-A", 1, "late-key")
	proxy.SetDelay(0)
	if late.code() != "key_unavailable" {
		t.Errorf("a purchase whose key was held late: %s %s, want 503 key_unavailable", late.codeLine(), late.raw)
	}
	if a := directAudit(t, direct, "LATE-A"); a.Orders != 0 || a.Stock != 10 {
		t.Errorf("audit %+v: the late purchase sold", a)
	}
	if again := buy(t, r, "LATE-A", 1, "late-key"); again.status != 201 {
		t.Errorf("the late key, sent again on a quick link: %s %s, want 201", again.codeLine(), again.raw)
	}
}

// Releases resume once an outage ends, while purchases keep coming: every answered change's key is
// released within moments, none left to expire.
func TestReleasesResumeAfterAnOutage(t *testing.T) {
	r, proxy, _ := behindDBProxy(t, order.ModeZK)
	resetStock(t, r, "OUTAGE-A", 100_000)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			buy(t, r, "OUTAGE-A", 1, fmt.Sprintf("outage-%d-%d", time.Now().UnixNano(), i))
		}
	}()
	time.Sleep(300 * time.Millisecond)
	proxy.Cut()
	time.Sleep(time.Second)
	proxy.Restore()
	time.Sleep(3 * time.Second) // purchases every 50 ms, past the worker's back-off of 2 s at most
	db, err := sql.Open("mysql", r.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Counted while the purchases still come (each wakes the worker): a purchase in flight holds
	// its key, the answered ones' are released.
	var held int
	if err := db.QueryRow("SELECT COUNT(*) FROM key_attempts").Scan(&held); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	if held > 3 {
		t.Fatalf("%d keys held 3 s after the outage, purchases one at a time: the answered ones' releases stopped", held)
	}
}
