package lincheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
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

// do sends one change, and again under its key while its answers promise it nothing (Config.Retries),
// from replica first on, and records it; kept is false when it is left out of the history. got are
// the orders it was answered for; retryAfter, the last answer's Retry-After (0 without one).
func (r *Recorder) do(ctx context.Context, c, first int, in Input, key string, cancel ownOrder) (out Output, got []ownOrder, kept bool, retryAfter time.Duration) {
	if in.Kind == Cancel {
		key = cancel.key
	}
	var (
		req       request
		answered  []string
		observed  []Observation
		call, ret int64
		sent      bool
	)
	defer func() {
		for _, o := range observed {
			o.InHistory = kept
			r.cfg.Observe(o)
		}
	}()
	for attempt := 0; ; attempt++ {
		replica := r.cfg.Replicas[(first+attempt)%len(r.cfg.Replicas)]
		areq := r.requestFor(replica, in, key, cancel)
		started := time.Now()
		acall := r.now()
		status, raw, header, err := r.sendAttempt(ctx, c, areq)
		aret := r.now()
		aout, agot, problem := Output{Result: Unknown, Short: -1, Answer: "not sent"}, []ownOrder(nil), ""
		if err == nil || !notSent(err) {
			aout, agot, problem = r.classify(in, key, status, raw, err, attempt > 0)
			r.count(in.Kind.String()+" "+aout.Answer, nil)
			if !sent {
				call, sent = acall, true
			}
			req, out, got, ret = areq, aout, agot, aret
			retryAfter = retryAfterOf(header)
		} else {
			r.count(in.Kind.String()+" not sent", func(s *Stats) { s.NotSent++ })
		}
		if r.cfg.Observe != nil {
			observed = append(observed, Observation{Client: c, Kind: in.Kind, Answer: aout.Answer, Result: aout.Result, Start: started,
				End: started.Add(time.Duration(aret - acall)), Replica: replica, Key: key})
		}
		if err != nil && !notSent(err) && r.impatient(c) && errors.Is(err, context.DeadlineExceeded) {
			r.count("", func(s *Stats) { s.GaveUp++ })
		}
		answered = append(answered, fmt.Sprintf("%s: %s", replicaName(replica, r.cfg.Replicas), aout.Answer))
		if problem != "" {
			r.count("", func(s *Stats) {
				if status == http.StatusBadRequest {
					s.BadRequests++
				} else {
					s.BadAnswers++
				}
				if len(s.Problems) < 5 {
					s.Problems = append(s.Problems, fmt.Sprintf("%s %s %s (key %s): %s: %d %s", areq.method, areq.path, areq.body, key, problem, status, strings.TrimSpace(string(raw))))
				}
			})
		}
		if (sent && out.Result != Unknown) || in.Kind == Read || attempt >= r.cfg.Retries || r.stop.Load() || ctx.Err() != nil {
			break
		}
		r.count("", func(s *Stats) {
			s.Retries++
			if attempt == 0 {
				s.Retried++
			}
		})
		time.Sleep(r.retryPause(header))
	}
	if !sent {
		return Output{Result: Unknown, Short: -1, Answer: "cut"}, nil, false, 0 // no attempt reached a replica: nothing can have changed
	}
	meta := fmt.Sprintf("key %s: %s", key, strings.Join(answered, ", "))
	if in.Kind == Cancel {
		meta = fmt.Sprintf("order %d (key %s): %s", cancel.id, key, strings.Join(answered, ", "))
	}
	if len(got) == 1 {
		meta += fmt.Sprintf(", order %d", got[0].id)
	}
	op := porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret, Metadata: meta}
	r.mu.Lock()
	defer r.mu.Unlock()
	if in.Kind != Read && (out.Result == Refused || out.Result == OutOfStock) && !strings.HasSuffix(out.Answer, " idempotency_key_reused") {
		// Its promise, nothing was changed by any attempt under its key, is checked by its key
		// after the history (but for a key another request holds, which the look-up would find).
		r.refusals = append(r.refusals, refusal{op: op, req: req})
	}
	switch {
	case out.Result == Refused, in.Kind == Read && out.Result != OK:
		return out, nil, false, retryAfter // it changed nothing, so no operation can have seen it
	case out.Result == Unknown:
		r.stats.Unknown++
	}
	r.hist = append(r.hist, op)
	r.reqs = append(r.reqs, req)
	return out, got, true, retryAfter
}

// sendAttempt sends one attempt of client c, which gives up after GiveUpAfter if impatient.
func (r *Recorder) sendAttempt(ctx context.Context, c int, req request) (int, []byte, http.Header, error) {
	if r.impatient(c) && req.method != http.MethodGet {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.GiveUpAfter)
		defer cancel()
	}
	return r.sendFor(ctx, req.method, req.replica+req.path, req.body, false, req.hdr)
}

// retryPause is the wait before a retry: the answer's Retry-After (request_in_progress gives
// one), or RetryPause.
func (r *Recorder) retryPause(h http.Header) time.Duration {
	if d := retryAfterOf(h); d > 0 {
		return d
	}
	return r.cfg.RetryPause
}

// retryAfterOf is an answer's Retry-After, in whole seconds; 0 without one.
func retryAfterOf(h http.Header) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// classify reads an answer by its promise to a first attempt or a retry (answers.OfAttempt): done (OK, with what it says of the stock),
// nothing changed (OutOfStock for a short purchase or cart, Refused for the rest), or not known
// (Unknown: no answer, an answer that says so, or a success without the documented fields).
// problem says what is wrong with a 400 or a success without its fields.
func (r *Recorder) classify(in Input, key string, status int, raw []byte, err error, retry bool) (out Output, got []ownOrder, problem string) {
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
	promise := answers.OfAttempt(status, e.Code, retry)
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
	var replay struct {
		Replayed bool `json:"replayed"`
	}
	if status == http.StatusOK && in.Kind != Read && json.Unmarshal(raw, &replay) == nil && replay.Replayed {
		// Made before this answer, by an earlier attempt under the key: what the change left is
		// not this answer's to say (a replayed cancellation reports today's stock).
		if in.Kind == Cancel {
			out.Result = Applied
			return out, nil, ""
		}
		made, got, problem := r.parseDone(in, key, http.StatusCreated, raw, out)
		if problem == "" {
			made.Result, made.Remaining = Applied, [2]int64{}
		}
		return made, got, problem
	}
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
