package async

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// CallUndo hands op's result to exactly one side: the caller when it was still waiting, undo when
// the caller had given up, however the two race.
func TestCallUndoHandsTheResultToOneSide(t *testing.T) {
	closed := make(chan struct{})
	errClosed := errors.New("closed")
	for i := range 2000 {
		ctx, cancel := context.WithCancel(context.Background())
		release := make(chan struct{})
		var undone, taken atomic.Int32
		undoneCh := make(chan struct{}, 1)
		go func() {
			<-release
			if i%2 == 0 {
				cancel() // the caller gives up at about the moment op answers
			}
		}()
		v, err := CallUndo(ctx, closed, errClosed, func() (int, error) {
			close(release)
			if i%3 == 0 {
				time.Sleep(time.Microsecond)
			}
			return 7, nil
		}, func(v int, err error) {
			if v != 7 || err != nil {
				t.Errorf("undo got %d, %v", v, err)
			}
			undone.Add(1)
			undoneCh <- struct{}{}
		})
		if err == nil {
			if v != 7 {
				t.Fatalf("round %d: caller got %d", i, v)
			}
			taken.Add(1)
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %v", i, err)
		} else {
			select {
			case <-undoneCh:
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: the caller gave up and undo never ran", i)
			}
		}
		cancel()
		time.Sleep(time.Microsecond) // let a late undo show itself
		if n := undone.Load() + taken.Load(); n != 1 {
			t.Fatalf("round %d: the result went to %d sides (undo %d, caller %d)", i, n, undone.Load(), taken.Load())
		}
	}
}

// A caller that gives up long before op answers: undo runs once op answers, not before.
func TestCallUndoRunsUndoOnceTheAnswerComes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	answer := make(chan struct{})
	undone := make(chan int, 1)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err := CallUndo(ctx, nil, nil, func() (int, error) { <-answer; return 42, nil }, func(v int, _ error) { undone <- v })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("caller: %v, want context.Canceled", err)
	}
	select {
	case v := <-undone:
		t.Fatalf("undo ran (%d) before op answered", v)
	case <-time.After(50 * time.Millisecond):
	}
	close(answer)
	awaitUndo(t, undone, 42)
}

// awaitUndo waits for undo to report op's result, want.
func awaitUndo(t *testing.T, undone <-chan int, want int) {
	t.Helper()
	select {
	case v := <-undone:
		if v != want {
			t.Fatalf("undo got %d, want %d", v, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("undo never ran")
	}
}

// A client that closes while op is on its way: the caller hears closedErr at once, and undo gets
// op's result when it comes. A caller whose ctx had ended already sends nothing.
func TestCallUndoOnCloseAndAfterTheEnd(t *testing.T) {
	closed := make(chan struct{})
	errClosed := errors.New("closed")
	answer := make(chan struct{})
	undone := make(chan int, 1)
	go func() { time.Sleep(20 * time.Millisecond); close(closed) }()
	_, err := CallUndo(context.Background(), closed, errClosed, func() (int, error) { <-answer; return 5, nil }, func(v int, _ error) { undone <- v })
	if !errors.Is(err, errClosed) {
		t.Fatalf("caller: %v, want the closed error", err)
	}
	close(answer)
	awaitUndo(t, undone, 5)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	_, err = CallUndo(ctx, nil, nil, func() (int, error) { ran = true; return 0, nil }, func(int, error) { t.Error("undo ran for an op never sent") })
	if !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("after the end: %v, op ran %v", err, ran)
	}
}
