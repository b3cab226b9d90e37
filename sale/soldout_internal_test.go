package sale

import (
	"context"
	"errors"
	"sync"
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

// Purchases of a suspected SKU wait for one read before holding their keys: after it, those it
// finds short are out_of_stock when their key is in no use (or is the service's), after one
// look-up of the client keys among them with KeysInUse, or of all the waiting ones in the read's
// own round trip (combined); a key in use, a look-up that fails, and a stock enough for the
// purchase send it on to hold its key. A restock seen here sends the waiting purchases on at once.
func TestSoldOutAnswersBeforeTheHoldAfterOneRead(t *testing.T) {
	for _, v := range []struct{ failing, combined bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		failing := v.failing
		var lookups [][]string
		readDone, began := make(chan struct{}), make(chan struct{}, 1)
		var stock int64
		so := newSoldOut(func(context.Context, []string) (map[string]int64, error) {
			select {
			case began <- struct{}{}:
			default:
			}
			<-readDone // every purchase has arrived before the first read is answered
			stock++    // none at the first read, one unit at the next
			return map[string]int64{"LAST": stock - 1}, nil
		}, make(chan struct{}), false)
		so.keys = func(context.Context, []string) (map[string]bool, error) {
			t.Error("the purchases before their holds were looked up with KeysWithOrders, which misses holdings")
			return nil, nil
		}
		so.keysInUse = func(_ context.Context, keys []string) (map[string]bool, error) {
			lookups = append(lookups, keys)
			if failing {
				return nil, errors.New("the database did not answer")
			}
			return map[string]bool{"in-use": true}, nil
		}
		if v.combined {
			so.stocksThenKeys = func(ctx context.Context, skus, keys []string) (map[string]int64, map[string]bool, error) {
				stocks, err := so.stocks(ctx, skus)
				if err != nil {
					return nil, nil, err
				}
				inUse, err := so.keysInUse(ctx, keys)
				return stocks, inUse, err
			}
		}
		so.noteShort("LAST")
		type purchase struct {
			key string
			qty int64
		}
		// The first purchase starts the poller's first read; the others arrive during it, and
		// wait for the next.
		buyers := []purchase{{"", 2}, {"free", 2}, {"in-use", 2}, {"enough", 1}}
		want := map[string]bool{"": true, "free": !failing, "in-use": false, "enough": false}
		got := make(map[string]bool)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i, b := range buyers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				short := so.shortBeforeHold(context.Background(), "LAST", b.qty, b.key)
				mu.Lock()
				got[b.key] = short
				mu.Unlock()
			}()
			if i == 0 {
				<-began
			}
		}
		for waiting := 0; waiting < len(buyers); time.Sleep(time.Millisecond) {
			so.mu.Lock()
			waiting = len(so.skus["LAST"].unheld)
			so.mu.Unlock()
		}
		close(readDone)
		wg.Wait()
		for key, w := range want {
			if got[key] != w {
				t.Errorf("%+v: the purchase keyed %q: out_of_stock %v, want %v", v, key, got[key], w)
			}
		}
		switch {
		case !v.combined && (len(lookups) != 1 || len(lookups[0]) != 2):
			t.Errorf("failing %v: look-ups %v; want one, of the two short client keys", failing, lookups)
		case v.combined && !failing && (len(lookups) != 1 || len(lookups[0]) != 3):
			t.Errorf("combined: look-ups %v; want one, of the three waiting client keys", lookups)
		}
	}

	// A read that fails sends the purchases waiting for it on at once.
	failed := newSoldOut(func(context.Context, []string) (map[string]int64, error) {
		return nil, errors.New("the database did not answer")
	}, make(chan struct{}), false)
	failed.noteShort("AWAY")
	start := time.Now()
	if failed.shortBeforeHold(context.Background(), "AWAY", 1, "k") {
		t.Error("a purchase whose read failed was answered out_of_stock")
	}
	if d := time.Since(start); d >= unheldWait {
		t.Errorf("a purchase whose read failed waited %v, its whole wait: not sent on by the failure", d)
	}

	so := newSoldOut(func(ctx context.Context, _ []string) (map[string]int64, error) {
		<-ctx.Done() // a read that never answers
		return nil, ctx.Err()
	}, make(chan struct{}), false)
	so.noteShort("BACK")
	answered := make(chan bool, 1)
	go func() { answered <- so.shortBeforeHold(context.Background(), "BACK", 1, "k") }()
	time.Sleep(20 * time.Millisecond)
	so.noteRestock("BACK", 5)
	select {
	case short := <-answered:
		if short {
			t.Error("a purchase waiting when the product was restocked was answered out_of_stock")
		}
	case <-time.After(time.Second):
		t.Error("a purchase waiting before its hold was not sent on by a restock")
	}
}
