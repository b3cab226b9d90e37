package order_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// callAs is call as client c (clientFrom): one request, its status, code and Retry-After.
func callAs(t *testing.T, c *http.Client, method, url, body string, headers ...string) (status int, code, retryAfter string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var answer struct{ Code string }
	_ = json.Unmarshal(raw, &answer)
	return resp.StatusCode, answer.Code, resp.Header.Get("Retry-After")
}

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
		status, code, retry := callAs(t, guesser, "GET", fmt.Sprintf("%s/v1/orders?request_id=guessable-%04d", r.URL, 4095-n), "")
		answers[fmt.Sprintf("%d %s", status, code)]++
		if status == http.StatusTooManyRequests {
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
	if status, code, _ := callAs(t, clientFrom("127.0.0.21"), "GET", r.URL+"/v1/orders?request_id=guessable-0042", ""); status != 200 {
		t.Errorf("another client's look-up: %d %s", status, code)
	}
	// Cancellations with guessed keys: 5 at once, then 429, and nothing cancelled.
	cancel := r.URL + "/v1/orders/" + strconv.FormatInt(sold.orderID(), 10) + "/cancel"
	cancels := map[string]int{}
	for n := range 30 {
		status, code, _ := callAs(t, guesser, "POST", cancel, fmt.Sprintf(`{"request_id":"guessable-%04d"}`, n))
		cancels[fmt.Sprintf("%d %s", status, code)]++
	}
	t.Logf("30 guessed cancellations: %v", cancels)
	if cancels["429 rate_limited"] < 20 || cancels["403 wrong_key"] > 10 {
		t.Errorf("30 guessed cancellations from one client were answered %v, want at most about 5 tried and the rest 429 rate_limited", cancels)
	}
	if a := auditOf(t, r, sku); a.Cancelled != 0 {
		t.Fatalf("a guessed cancellation cancelled the order: %+v", a)
	}
	// The admin's cancellation is not counted against its address.
	if status, code, _ := callAs(t, guesser, "POST", cancel, `{}`, "Authorization", "Bearer "+adminToken); status != 200 {
		t.Errorf("the admin's cancellation from a throttled address: %d %s", status, code)
	}
}
