package lincheck

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Each answer is read by its promise (internal/answers): a refusal is a definite "nothing changed",
// out_of_stock too (with the SKU a cart names); only an answer that says the outcome is not known,
// an internal error, an answer not the service's, or none, stays Unknown.
func TestClassifyByPromise(t *testing.T) {
	r := &Recorder{cfg: Config{SKUs: [2]string{"A", "B"}}}
	buy := Input{Kind: Buy, SKU: 1, Qty: [2]int64{0, 2}}
	cart := Input{Kind: Cart, Qty: [2]int64{1, 1}}
	cancel := Input{Kind: Cancel, SKU: 0, Qty: [2]int64{1, 0}}
	for _, c := range []struct {
		in     Input
		status int
		body   string
		err    error
		want   Result
		short  int
	}{
		{buy, 201, `{"remaining":3,"order":{"id":7}}`, nil, OK, -1},
		{buy, 409, `{"code":"out_of_stock"}`, nil, OutOfStock, -1},
		{cart, 409, `{"code":"out_of_stock","sku":"B"}`, nil, OutOfStock, 1},
		{buy, 503, `{"code":"storage_unavailable"}`, nil, Refused, -1},
		{buy, 503, `{"code":"lock_lost"}`, nil, Refused, -1},
		{buy, 503, `{"code":"sku_busy"}`, nil, Refused, -1},
		{cart, 503, `{"code":"not_a_member"}`, nil, Refused, -1},
		{cancel, 503, `{"code":"stale_token"}`, nil, Refused, -1},
		{cancel, 503, `{"code":"shutting_down"}`, nil, Refused, -1},
		{buy, 422, `{"code":"idempotency_key_reused"}`, nil, Refused, -1},
		{buy, 400, `{"code":"something_new"}`, nil, Refused, -1},
		{buy, 503, `{"code":"outcome_unknown"}`, nil, Unknown, -1},
		{cancel, 503, `{"code":"outcome_unknown"}`, nil, Unknown, -1},
		{buy, 500, `{"code":"internal"}`, nil, Unknown, -1},
		{buy, 502, `bad gateway`, nil, Unknown, -1},
		{buy, 503, `{"code":"no_such_code"}`, nil, Unknown, -1},
		{buy, 0, ``, errors.New("read: connection reset"), Unknown, -1},
		{buy, 201, `{"order":{"id":7}}`, nil, Unknown, -1}, // a success without its fields
	} {
		out, _, _ := r.classify(c.in, "k", c.status, []byte(c.body), c.err, false)
		if out.Result != c.want || out.Short != c.short {
			t.Errorf("%s answered %d %s: result %d short %d, want %d short %d", c.in.Kind, c.status, c.body, out.Result, out.Short, c.want, c.short)
		}
	}
}

// The negative control: a shop that answers a change it made "503 storage_unavailable" (nothing
// was changed) is caught by the look-up of every refusal by its key, which says which answer lied;
// read as an unknown outcome and resolved by the same look-up, as every 503 once was, the change
// would have been taken as made and the history found linearizable. The honest shop, which
// answers outcome_unknown there, has no broken promise and is linearizable.
func TestAFalseNothingChangedIsCaught(t *testing.T) {
	for _, lies := range []bool{false, true} {
		sh := newShop(false)
		sh.flaky, sh.lies = true, lies
		h := recordOn(t, sh, 5, 600)
		st := h.Stats
		t.Logf("lies %v: %d ops, %d refused, %d broken, answers %v", lies, st.Ops, st.Refused, st.BrokenPromises, st.Answers)
		if st.Refused == 0 || st.RefusalsUnchecked != 0 {
			t.Errorf("lies %v: %d refusals, %d unchecked", lies, st.Refused, st.RefusalsUnchecked)
		}
		switch {
		case !lies && (st.BrokenPromises != 0 || len(h.Broken) != 0):
			t.Errorf("the honest shop broke %d promises: %v", st.BrokenPromises, h.Broken)
		case lies && (st.BrokenPromises == 0 || len(h.Broken) != st.BrokenPromises):
			t.Errorf("the lying shop's false refusals went unseen: %d broken, %v", st.BrokenPromises, h.Broken)
		case lies && !strings.Contains(h.Broken[0].String(), "503 storage_unavailable"):
			t.Errorf("a broken promise does not say its answer: %s", h.Broken[0])
		}
		if v := h.Check(30 * time.Second); !lies && !v.Linearizable() {
			t.Errorf("the honest shop: Porcupine says %s", v.Outcome)
		}
	}
}

// A sale answered 201 and then lost (the shop forgets one in seven, as a database whose commits
// did not survive a crash) is caught by the look-up of every change answered done: a broken
// promise that says its answer. The honest shop's sales are all found.
func TestADoneFoundNotMadeIsCaught(t *testing.T) {
	for _, forgets := range []bool{false, true} {
		sh := newShop(false)
		sh.forgets = forgets
		h := recordOn(t, sh, 7, 400)
		notMade := 0
		for _, b := range h.Broken {
			if b.NotMade {
				notMade++
			}
		}
		t.Logf("forgets %v: %d ops, %d broken (%d found not made), %d unchecked", forgets, h.Stats.Ops, len(h.Broken), notMade, h.Stats.DoneUnchecked)
		switch {
		case h.Stats.DoneUnchecked != 0:
			t.Errorf("forgets %v: %d changes answered done were not looked up", forgets, h.Stats.DoneUnchecked)
		case !forgets && len(h.Broken) != 0:
			t.Errorf("the honest shop broke promises: %v", h.Broken)
		case forgets && (notMade == 0 || !strings.Contains(h.Broken[0].String(), "found not made")):
			t.Errorf("the shop's lost sales went unseen: %v", h.Broken)
		}
	}
}

// recordOn records a history of up to maxOps operations against sh, six clients, unknown outcomes
// resolved by their keys, for 300 ms.
func recordOn(t *testing.T, sh *shop, seed uint64, maxOps int) *History {
	t.Helper()
	srv := httptest.NewServer(sh)
	t.Cleanup(srv.Close)
	rec, err := Start(context.Background(), Config{Replicas: []string{srv.URL}, AdminToken: "x", Stock: 100, Clients: 6, MaxOps: maxOps,
		Pause: 2 * time.Millisecond, Seed: seed, ResolveByKey: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	h, err := rec.Stop()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
