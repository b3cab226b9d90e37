package order_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
)

// Issue 50, finding 4: look-ups by key ran at 2,520/s and a key of a 4,096-key space was found in
// 0.85 s, then its order cancelled. Now each client's look-ups by key and cancellations are
// throttled (KEY_LOOKUP_RATE/BURST, CANCEL_RATE/BURST: here 1 a second in bursts of 20 and of
// 5), answered 429 rate_limited with Retry-After past them, while another client is served and
// the admin is not counted. On the code before, all 200 guesses were answered 404 unknown_order.
func TestKeyGuessingIsThrottled(t *testing.T) {
	r := newCluster(t, 1, clusterOpts{KeyLookupRate: 1, KeyLookupBurst: 20, CancelRate: 1, CancelBurst: 5})[0]
	const sku = "KEY-1"
	resetStock(t, r, sku, 10)
	sold := buy(t, r, sku, 1, "guessable-0042")
	if sold.status != 201 {
		t.Fatalf("purchase: %s", sold.raw)
	}
	guesser := clientFrom("127.0.0.20")
	answers := map[string]int{}
	for n := range 200 {
		rep := callAs(t, guesser, "GET", fmt.Sprintf("%s/v1/orders?request_id=guessable-%04d", r.URL, 4095-n), "")
		answers[rep.codeLine()]++
		if retry := rep.header.Get("Retry-After"); rep.status == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(retry); err != nil || s < 1 {
				t.Fatalf("429 with Retry-After %q, want whole seconds", retry)
			}
		}
	}
	t.Logf("200 guessed look-ups: %v", answers)
	if answers["429 rate_limited"] < 150 || answers["404 unknown_order"] > 50 { // the code before: 200 404s
		t.Errorf("200 guessed look-ups from one client were answered %v, want at most about 20 looked up and the rest 429 rate_limited", answers)
	}
	// Another client, and the buyer, are served meanwhile.
	if rep := callAs(t, clientFrom("127.0.0.21"), "GET", r.URL+"/v1/orders?request_id=guessable-0042", ""); rep.status != 200 {
		t.Errorf("another client's look-up: %s", rep.raw)
	}
	// Cancellations with guessed keys: 5 at once, then 429, and nothing cancelled.
	cancel := r.URL + "/v1/orders/" + strconv.FormatInt(sold.orderID(), 10) + "/cancel"
	cancels := map[string]int{}
	for n := range 30 {
		cancels[callAs(t, guesser, "POST", cancel, fmt.Sprintf(`{"request_id":"guessable-%04d"}`, n)).codeLine()]++
	}
	t.Logf("30 guessed cancellations: %v", cancels)
	if cancels["429 rate_limited"] < 20 || cancels["403 wrong_key"] > 10 {
		t.Errorf("30 guessed cancellations from one client were answered %v, want at most about 5 tried and the rest 429 rate_limited", cancels)
	}
	if a := auditOf(t, r, sku); a.Cancelled != 0 {
		t.Fatalf("a guessed cancellation cancelled the order: %+v", a)
	}
	// The admin's cancellation is not counted against its address.
	if rep := callAs(t, guesser, "POST", cancel, `{}`, "Authorization", "Bearer "+adminToken); rep.status != 200 {
		t.Errorf("the admin's cancellation from a throttled address: %s", rep.raw)
	}
}
