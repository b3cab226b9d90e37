package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// clientFrom is an HTTP client whose connections come from a loopback address of its own: one
// client, as a replica counts them (its remote IP).
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// tryStream opens a live stream as c, kept open until the test ends; its status, and a refusal's code.
func tryStream(t *testing.T, c *http.Client, url string) (status int, code string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("stream: %v", err)
	}
	if resp.StatusCode == http.StatusOK {
		t.Cleanup(func() { cancel(); resp.Body.Close() })
		return resp.StatusCode, ""
	}
	defer cancel()
	defer resp.Body.Close()
	var body struct{ Code string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Code
}

// Issue 50, finding 5: one client could hold all 64 live streams of a replica, and 11 of 12 other
// viewers were refused for 120 s. Now one client (a remote IP) holds at most
// EVENT_STREAMS_PER_CLIENT (16) of them, the next is answered 429 too_many_streams, and 12 other
// viewers are each served. On the code before, the hog opened all 64 and the viewers got 503.
func TestOneClientCannotHoldEveryStream(t *testing.T) {
	r := newCluster(t, 1, clusterOpts{})[0] // EVENT_STREAMS 64, EVENT_STREAMS_PER_CLIENT 16
	const sku = "EV-HOG"
	resetStock(t, r, sku, 10)
	url := r.URL + "/v1/events?sku=" + sku
	hog := clientFrom("127.0.0.5")
	opened := 0
	for opened < 64 {
		status, code := tryStream(t, hog, url)
		if status != http.StatusOK {
			if status != http.StatusTooManyRequests || code != "too_many_streams" {
				t.Fatalf("the hog's stream %d: %d %s, want 429 too_many_streams", opened+1, status, code)
			}
			break
		}
		opened++
	}
	t.Logf("one client opened %d streams", opened)
	for v := range 12 {
		status, code := tryStream(t, clientFrom(fmt.Sprintf("127.0.0.%d", 10+v)), url)
		if status != http.StatusOK { // the code before: 503 too_many_streams, the hog holding all 64
			t.Errorf("viewer %d, another client: %d %s while one client holds %d streams", v+1, status, code, opened)
		}
	}
	if opened != 16 {
		t.Errorf("one client opened %d streams, want 16 (EVENT_STREAMS_PER_CLIENT)", opened)
	}
}
