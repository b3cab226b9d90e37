// Package async runs a blocking request without making its caller wait past a context or a
// shutdown. go-zookeeper has no contexts: a request it was given completes in the background
// whatever happens, so the caller can only stop waiting for it.
package async

import (
	"context"
	"sync"
)

// Call runs op and returns its result, or stops waiting when ctx ends (ctx.Err()) or closed is
// closed (closedErr). An abandoned op still runs to completion; its result is dropped.
func Call[T any](ctx context.Context, closed <-chan struct{}, closedErr error, op func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := op()
		ch <- result{v, err}
	}()
	var zero T
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-closed:
		return zero, closedErr
	}
}

// CallUndo is Call for an op whose effect must not outlive a caller that stopped waiting for it
// (a node created for a lock its caller gave up on): when the caller stops waiting first, undo
// runs with op's result once it comes, on a goroutine of its own. Exactly one of the two sees the
// result: the caller, or undo.
func CallUndo[T any](ctx context.Context, closed <-chan struct{}, closedErr error, op func() (T, error), undo func(T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err // nothing sent, nothing to undo
	}
	var mu sync.Mutex
	abandoned := false
	ch := make(chan result, 1)
	go func() {
		v, err := op()
		mu.Lock()
		if abandoned {
			mu.Unlock()
			undo(v, err)
			return
		}
		ch <- result{v, err}
		mu.Unlock()
	}()
	var err error
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-closed:
		err = closedErr
	}
	mu.Lock()
	abandoned = true
	select {
	case r := <-ch: // answered just before the caller gave up: nobody else will read it
		go undo(r.v, r.err)
	default:
	}
	mu.Unlock()
	return zero, err
}
