// Package async runs a blocking request without making its caller wait past a context or a
// shutdown. go-zookeeper has no contexts: a request it was given completes in the background
// whatever happens, so the caller can only stop waiting for it.
package async

import "context"

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
