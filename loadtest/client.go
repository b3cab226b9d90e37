package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"
)

// openLoopIdleConns is the open loop's bound on idle connections per replica (vegeta's default).
const openLoopIdleConns = 10000

// api talks to the replicas.
type api struct {
	http  *http.Client
	token string
}

func newAPI(c Config) *api {
	tr := &http.Transport{MaxIdleConns: c.Concurrency * 2, MaxIdleConnsPerHost: c.Concurrency, IdleConnTimeout: 30 * time.Second}
	if c.OpenLoop() {
		// As many connections stay open as purchases are in flight at the offered rate: closing
		// them after each answer would make every later purchase pay a new connection, and leave
		// thousands of sockets in TIME_WAIT at 1,000 purchases a second.
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 0, openLoopIdleConns
	}
	return &api{http: &http.Client{Transport: tr, Timeout: c.Timeout}, token: c.AdminToken}
}

// close closes the connections left idle, once a run is over: kept, they would count for up to
// IdleConnTimeout against the replicas' cap on one client's connections (429
// too_many_connections), and draw refusals the next run in this process did not earn.
func (a *api) close() { a.http.CloseIdleConnections() }

type apiError struct {
	Status int
	Code   string `json:"code"`
	Msg    string `json:"error"`
	SKU    string `json:"sku"` // a cart's first short item
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Msg) }

// adminHeader authorizes a call of the admin API.
func (a *api) adminHeader() map[string]string {
	return map[string]string{"Authorization": "Bearer " + a.token}
}

// do sends a JSON request with the given headers and decodes a 2xx answer into out.
func (a *api) do(ctx context.Context, method, url string, body, out any, header map[string]string) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, fmt.Errorf("request %s: %w", url, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read answer of %s: %w", url, err)
	}
	if resp.StatusCode >= 300 {
		e := &apiError{Status: resp.StatusCode}
		_ = json.Unmarshal(raw, e)
		return resp.StatusCode, e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode answer of %s: %w", url, err)
		}
	}
	return resp.StatusCode, nil
}

// purchaseAnswer is a sale's answer, or a cart's (several orders, the stock left per SKU).
type purchaseAnswer struct {
	Remaining json.RawMessage `json:"remaining"`
	Order     *orderRef       `json:"order"`
	Orders    []orderRef      `json:"orders"`
}

type orderRef struct {
	ID int64 `json:"id"`
}

func (p purchaseAnswer) orderIDs() []int64 {
	if p.Order != nil {
		return []int64{p.Order.ID}
	}
	ids := make([]int64, len(p.Orders))
	for i, o := range p.Orders {
		ids[i] = o.ID
	}
	return ids
}

// remaining is the stock left: a sale's, or the least of a cart's SKUs.
func (p purchaseAnswer) remaining() int64 {
	var n int64
	if json.Unmarshal(p.Remaining, &n) == nil {
		return n
	}
	var perSKU map[string]int64
	if json.Unmarshal(p.Remaining, &perSKU) != nil || len(perSKU) == 0 {
		return 0
	}
	least := int64(math.MaxInt64)
	for _, v := range perSKU {
		least = min(least, v)
	}
	return least
}

// Audit is the replica's audit of the SKU.
type Audit struct {
	InitialStock int64 `json:"initial_stock"`
	Stock        int64 `json:"stock"`
	Orders       int64 `json:"orders"`
	UnitsSold    int64 `json:"units_sold"`
	// Cancelled orders' units went back to stock; Orders and UnitsSold count the others.
	Cancelled      int64 `json:"cancelled"`
	UnitsRestocked int64 `json:"units_restocked"`
	Oversold       int64 `json:"oversold"`
	LostUpdates    int64 `json:"lost_updates"`
}
