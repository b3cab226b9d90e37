package sale

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A read that finds the stock gone sends the queued purchases away after one look-up of their
// keys: a key holding no order (or a key the service made) leaves with errSoldOutKeyFree, a key
// that holds one with errSoldOutWhileQueued (its own look-up then answers it with its order); and
// when the look-up fails, every keyed purchase leaves to be looked up on its own.
func TestSoldOutLooksUpTheKeysItSendsAwayAtOnce(t *testing.T) {
	for _, failing := range []bool{false, true} {
		var lookups [][]string
		so := newSoldOut(func(context.Context, []string) (map[string]int64, error) {
			return map[string]int64{"GONE": 0}, nil
		}, make(chan struct{}), false)
		so.keys = func(_ context.Context, keys []string) (map[string]bool, error) {
			lookups = append(lookups, keys)
			if failing {
				return nil, errors.New("the database did not answer")
			}
			return map[string]bool{"sold-before": true}, nil
		}
		waits := map[string]context.Context{}
		for _, key := range []string{"", "fresh", "sold-before"} {
			ctx, done := so.queue(context.Background(), "GONE", 1, key)
			defer done()
			waits[key] = ctx
		}
		so.noteStock("GONE", 0) // a sale here left none: suspected, and the poller reads
		want := map[string]error{"": errSoldOutKeyFree, "fresh": errSoldOutKeyFree, "sold-before": errSoldOutWhileQueued}
		if failing {
			want["fresh"] = errSoldOutWhileQueued
		}
		for key, ctx := range waits {
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("failing %v: the purchase keyed %q was not sent away", failing, key)
			}
			cause := context.Cause(ctx)
			if !errors.Is(cause, errSoldOutWhileQueued) || errors.Is(cause, errSoldOutKeyFree) != (want[key] == errSoldOutKeyFree) {
				t.Errorf("failing %v: the purchase keyed %q left with %v, want %v", failing, key, cause, want[key])
			}
		}
		if len(lookups) != 1 || len(lookups[0]) != 2 {
			t.Errorf("failing %v: look-ups %v; want one, of the two client keys", failing, lookups)
		}
	}
}
