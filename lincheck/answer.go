package lincheck

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zkstock/zkstock/internal/answers"
)

// request is how an operation was sent, to send it again or look it up.
type request struct {
	replica, method, path, body string
	hdr                         map[string]string
}

// requestFor is the HTTP request of an operation: key is a purchase's or cart's Idempotency-Key,
// cancel the order a cancellation cancels.
func (r *Recorder) requestFor(replica string, in Input, key string, cancel ownOrder) request {
	skus := r.cfg.SKUs
	req := request{replica: replica}
	switch in.Kind {
	case Buy:
		req.method, req.path = http.MethodPost, "/v1/orders"
		req.body = fmt.Sprintf(`{"sku":%q,"qty":%d}`, skus[in.SKU], in.Qty[in.SKU])
		req.hdr = map[string]string{"Idempotency-Key": key}
	case Cart:
		req.method, req.path = http.MethodPost, "/v1/orders"
		req.body = fmt.Sprintf(`{"items":[{"sku":%q,"qty":%d},{"sku":%q,"qty":%d}]}`, skus[0], in.Qty[0], skus[1], in.Qty[1])
		req.hdr = map[string]string{"Idempotency-Key": key}
	case Cancel:
		req.method, req.path = http.MethodPost, fmt.Sprintf("/v1/orders/%d/cancel", cancel.id)
		b, _ := json.Marshal(map[string]string{"request_id": cancel.key})
		req.body = string(b)
	case Read:
		req.method, req.path = http.MethodGet, "/v1/products/"+url.PathEscape(skus[in.SKU])
	}
	return req
}

// do sends one operation and records it; kept is false when it is left out of the history. got
// are the orders it was answered 201 for.
func (r *Recorder) do(ctx context.Context, c int, replica string, in Input, key string, cancel ownOrder) (out Output, got []ownOrder, kept bool) {
	if in.Kind == Cancel {
		key = cancel.key
	}
	req := r.requestFor(replica, in, key, cancel)
	started := time.Now()
	call := r.now()
	status, raw, err := r.send(ctx, req.method, replica+req.path, req.body, false, req.hdr)
	ret := r.now()
	if r.cfg.Observe != nil {
		defer func() {
			answer := out.Answer
			if err != nil && notSent(err) {
				answer = "not sent"
			}
			r.cfg.Observe(Observation{Client: c, Kind: in.Kind, Answer: answer, Result: out.Result, Start: started,
				End: started.Add(time.Duration(ret - call)), InHistory: kept, Replica: replica, Key: key})
		}()
	}
	name := replicaName(replica, r.cfg.Replicas)
	meta := fmt.Sprintf("%s, key %s", name, key)
	if in.Kind == Cancel {
		meta = fmt.Sprintf("%s, order %d (key %s)", name, cancel.id, key)
	}
	if err != nil {
		if notSent(err) {
			r.count(in.Kind.String()+" not sent", func(s *Stats) { s.NotSent++ })
			return Output{Result: Unknown, Short: -1, Answer: "cut"}, nil, false
		}
		meta += ": " + err.Error()
	}
	out, got, problem := r.classify(in, key, status, raw, err)
	r.count(in.Kind.String()+" "+out.Answer, nil)
	if problem != "" {
		r.count("", func(s *Stats) {
			if status == http.StatusBadRequest {
				s.BadRequests++
			} else {
				s.BadAnswers++
			}
			if len(s.Problems) < 5 {
				s.Problems = append(s.Problems, fmt.Sprintf("%s %s %s (%s): %s: %d %s", req.method, req.path, req.body, meta, problem, status, strings.TrimSpace(string(raw))))
			}
		})
	}
	if len(got) == 1 {
		meta += fmt.Sprintf(", order %d", got[0].id)
	}
	op := porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret, Metadata: meta}
	r.mu.Lock()
	defer r.mu.Unlock()
	if in.Kind != Read && (out.Result == Refused || out.Result == OutOfStock) && !strings.HasSuffix(out.Answer, " idempotency_key_reused") {
		// Its promise, nothing was changed, is checked by its key after the history (but for a
		// key another request holds, which the look-up would find).
		r.refusals = append(r.refusals, refusal{op: op, req: req})
	}
	switch {
	case out.Result == Refused, in.Kind == Read && out.Result != OK:
		return out, nil, false // it changed nothing, so no operation can have seen it
	case out.Result == Unknown:
		r.stats.Unknown++
	}
	r.hist = append(r.hist, op)
	r.reqs = append(r.reqs, req)
	return out, got, true
}

// classify reads an answer by its promise (answers.Of): done (OK, with what it says of the stock),
// nothing changed (OutOfStock for a short purchase or cart, Refused for the rest), or not known
// (Unknown: no answer, an answer that says so, or a success without the documented fields).
// problem says what is wrong with a 400 or a success without its fields.
func (r *Recorder) classify(in Input, key string, status int, raw []byte, err error) (out Output, got []ownOrder, problem string) {
	var e struct {
		Code string `json:"code"`
		SKU  string `json:"sku"`
	}
	_ = json.Unmarshal(raw, &e)
	out = Output{Result: Unknown, Short: -1, Answer: strings.TrimSpace(fmt.Sprintf("%d %s", status, e.Code))}
	if err != nil {
		out.Answer = "cut"
		return out, nil, ""
	}
	if status == http.StatusBadRequest {
		problem = "bad request" // a request this package got wrong, or a service that refuses what its API documents
	}
	promise := answers.Of(status, e.Code)
	if status == http.StatusBadRequest {
		promise = answers.NotDone // whatever its code: the request was not taken
	}
	switch promise {
	case answers.NotDone:
		out.Result = Refused
		if status == http.StatusConflict && e.Code == "out_of_stock" && (in.Kind == Buy || in.Kind == Cart) {
			out.Result = OutOfStock
			for i, s := range r.cfg.SKUs {
				if e.SKU == s {
					out.Short = i
				}
			}
		}
		return out, nil, problem
	case answers.Done:
		return r.parseDone(in, key, status, raw, out)
	}
	return out, nil, problem
}

// parseDone reads a success: OK with the stock it reports, or Unknown when it lacks the fields
// the API documents (problem says which).
func (r *Recorder) parseDone(in Input, key string, status int, raw []byte, out Output) (Output, []ownOrder, string) {
	skus := r.cfg.SKUs
	switch {
	case status == http.StatusCreated && in.Kind == Buy:
		var a struct {
			Remaining *int64 `json:"remaining"`
			Order     *struct {
				ID int64 `json:"id"`
			} `json:"order"`
		}
		if json.Unmarshal(raw, &a) != nil || a.Remaining == nil || a.Order == nil {
			return out, nil, "no remaining or order"
		}
		out.Result, out.Remaining[in.SKU] = OK, *a.Remaining
		return out, []ownOrder{{id: a.Order.ID, sku: in.SKU, qty: in.Qty[in.SKU], key: key}}, ""
	case status == http.StatusCreated && in.Kind == Cart:
		var a struct {
			Remaining map[string]int64 `json:"remaining"`
			Orders    []struct {
				ID  int64  `json:"id"`
				SKU string `json:"sku"`
				Qty int64  `json:"qty"`
			} `json:"orders"`
		}
		err := json.Unmarshal(raw, &a)
		r0, ok0 := a.Remaining[skus[0]]
		r1, ok1 := a.Remaining[skus[1]]
		if err != nil || !ok0 || !ok1 || len(a.Orders) != 2 {
			return out, nil, "not both SKUs' remaining and orders"
		}
		out.Result, out.Remaining = OK, [2]int64{r0, r1}
		var got []ownOrder
		for _, o := range a.Orders {
			for i, s := range skus {
				if o.SKU == s {
					got = append(got, ownOrder{id: o.ID, sku: i, qty: o.Qty, key: key})
				}
			}
		}
		return out, got, ""
	case status == http.StatusOK && in.Kind == Cancel:
		var a struct {
			Remaining *int64 `json:"remaining"`
		}
		if json.Unmarshal(raw, &a) != nil || a.Remaining == nil {
			return out, nil, "no remaining"
		}
		out.Result, out.Remaining[in.SKU] = OK, *a.Remaining
	case status == http.StatusOK && in.Kind == Read:
		var a struct {
			Stock *int64 `json:"stock"`
		}
		if json.Unmarshal(raw, &a) != nil || a.Stock == nil {
			return out, nil, "no stock"
		}
		out.Result, out.Remaining[in.SKU] = OK, *a.Stock
	}
	return out, nil, ""
}
