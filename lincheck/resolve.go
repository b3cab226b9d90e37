package lincheck

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// refusal is an operation answered "nothing was changed" (answers.NotDone), whose promise is
// checked by its key after the history.
type refusal struct {
	op  porcupine.Operation
	req request
}

// BrokenPromise is an answer about a change that a look-up after the history found untrue: one
// answered "nothing was changed" and found made (the answer that makes a client send it again,
// under a new key, and buy twice), or one answered done (a 201, a cancellation's 200) and found
// not made (a sale the database lost).
type BrokenPromise struct {
	Kind   Kind
	Answer string // as answered: "503 storage_unavailable", "409 out_of_stock", "201"
	// Metadata is the operation's description: replica, key (and order, for a cancellation).
	Metadata string
	// NotMade: the change was answered done and found not made; false: answered not done and
	// found made.
	NotMade bool `json:",omitempty"`
}

func (b BrokenPromise) String() string {
	found := "made"
	if b.NotMade {
		found = "not made"
	}
	return fmt.Sprintf("%s answered %q, found %s: %s", b.Kind, b.Answer, found, b.Metadata)
}

// eachOf runs f on every index of todo, a few at a time.
func (r *Recorder) eachOf(todo []int, f func(int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(r.cfg.Clients, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for _, i := range todo {
		next <- i
	}
	close(next)
	wg.Wait()
}

// resolve sends every operation of unknown outcome once more (see Config.KeepUnknown), or looks
// it up (Config.ResolveByKey), and marks it Applied, or drops it (a nil Output), by the answer.
func (r *Recorder) resolve() {
	var todo []int
	for i, op := range r.hist {
		if op.Output.(Output).Result == Unknown {
			todo = append(todo, i)
		}
	}
	r.eachOf(todo, r.resolveOne)
}

func (r *Recorder) resolveOne(i int) {
	if r.cfg.ResolveByKey {
		r.lookUp(i)
		return
	}
	req := r.reqs[i]
	in := r.hist[i].Input.(Input)
	// The replica it went to first, then the others (it may be down).
	start := 0
	for k, u := range r.cfg.Replicas {
		if u == req.replica {
			start = k
		}
	}
	for k := range r.cfg.Replicas {
		u := r.cfg.Replicas[(start+k)%len(r.cfg.Replicas)]
		status, raw, err := r.send(context.Background(), req.method, u+req.path, req.body, false, req.hdr)
		if err != nil {
			continue
		}
		var a struct {
			Replayed bool   `json:"replayed"`
			Code     string `json:"code"`
		}
		_ = json.Unmarshal(raw, &a)
		done := a.Replayed && (status == http.StatusOK)
		notDone := status == http.StatusCreated && !a.Replayed ||
			status == http.StatusOK && in.Kind == Cancel && !a.Replayed ||
			status == http.StatusConflict && a.Code == "out_of_stock" && in.Kind != Cancel
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case done:
			r.markApplied(i, fmt.Sprintf("sent again after the history: %d, replayed", status))
		case notDone:
			r.hist[i].Output = nil
			r.stats.FoundNotDone++
		}
		return
	}
}

// markApplied marks operation i, of unknown outcome, found done. r.mu is held.
func (r *Recorder) markApplied(i int, how string) {
	out := r.hist[i].Output.(Output)
	out.Result = Applied
	r.hist[i].Output = out
	r.hist[i].Metadata = fmt.Sprintf("%v; %s", r.hist[i].Metadata, how)
	r.stats.FoundDone++
}

// lookUp resolves operation i by looking it up (Config.ResolveByKey).
func (r *Recorder) lookUp(i int) {
	done, answered := r.find(r.reqs[i], r.hist[i].Input.(Input))
	if !answered {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if done {
		r.markApplied(i, "looked up after the history: done")
		return
	}
	r.hist[i].Output = nil
	r.stats.FoundNotDone++
}

// find looks an operation up without changing anything, on each replica in turn until one
// answers: a purchase or cart by its key (a cart's first order carries the cart's key), a
// cancellation by its order (cancelled_at). answered is false when none did.
func (r *Recorder) find(req request, in Input) (done, answered bool) {
	var path string
	if in.Kind == Cancel {
		path, _, _ = strings.Cut(strings.TrimPrefix(req.path, "/v1/orders/"), "/")
		path = "/v1/orders/" + path
	} else {
		path = "/v1/orders?request_id=" + url.QueryEscape(req.hdr["Idempotency-Key"])
	}
	first := int(r.lastFound.Load()) // the replica that answered last, which is likely up
	for k := range r.cfg.Replicas {
		n := (first + k) % len(r.cfg.Replicas)
		status, raw, err := r.send(context.Background(), http.MethodGet, r.cfg.Replicas[n]+path, "", false, nil)
		if err != nil || status != http.StatusOK && status != http.StatusNotFound {
			continue
		}
		var a struct {
			Code  string `json:"code"`
			Order struct {
				CancelledAt *time.Time `json:"cancelled_at"`
			} `json:"order"`
		}
		_ = json.Unmarshal(raw, &a)
		if status == http.StatusNotFound && a.Code != "unknown_order" {
			continue // not the look-up's answer (a route, a proxy): it says nothing of the order
		}
		r.lastFound.Store(int32(n))
		// A cancellation's order always exists; it was done if it is cancelled, and only this
		// client cancels it, once.
		return status == http.StatusOK && (in.Kind != Cancel || a.Order.CancelledAt != nil), true
	}
	return false, false
}

// checkRefusals looks up every operation answered "nothing was changed": found made, its answer
// broke its promise.
func (r *Recorder) checkRefusals() {
	todo := make([]int, len(r.refusals))
	for i := range todo {
		todo[i] = i
	}
	r.eachOf(todo, func(i int) {
		ref := r.refusals[i]
		done, answered := r.find(ref.req, ref.op.Input.(Input))
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case !answered:
			r.stats.RefusalsUnchecked++
		case done:
			meta, _ := ref.op.Metadata.(string)
			r.broken = append(r.broken, BrokenPromise{Kind: ref.op.Input.(Input).Kind, Answer: ref.op.Output.(Output).Answer, Metadata: meta})
		}
	})
}

// checkDone looks up every change answered done (a purchase's or a cart's 201, a cancellation's
// 200): found not made, its answer broke its promise.
func (r *Recorder) checkDone() {
	var todo []int
	for i, op := range r.hist {
		out, ok := op.Output.(Output)
		if ok && out.Result == OK && op.Input.(Input).Kind != Read {
			todo = append(todo, i)
		}
	}
	r.eachOf(todo, func(i int) {
		done, answered := r.find(r.reqs[i], r.hist[i].Input.(Input))
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case !answered:
			r.stats.DoneUnchecked++
		case !done:
			meta, _ := r.hist[i].Metadata.(string)
			r.broken = append(r.broken, BrokenPromise{Kind: r.hist[i].Input.(Input).Kind, Answer: r.hist[i].Output.(Output).Answer, Metadata: meta, NotMade: true})
		}
	})
}
