package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// api talks to the replicas.
type api struct {
	http  *http.Client
	token string
}

func newAPI(c Config) *api {
	tr := &http.Transport{MaxIdleConns: c.Concurrency * 2, MaxIdleConnsPerHost: c.Concurrency, IdleConnTimeout: 30 * time.Second}
	return &api{http: &http.Client{Transport: tr, Timeout: c.Timeout}, token: c.AdminToken}
}

type apiError struct {
	Status int
	Code   string `json:"code"`
	Msg    string `json:"error"`
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

type purchaseAnswer struct {
	Remaining int64 `json:"remaining"`
	Order     struct {
		ID int64 `json:"id"`
	} `json:"order"`
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
