package teaching_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/teaching"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// tokenHolder takes a lock on a path and says its fencing token.
type tokenHolder struct {
	name string
	lock func(ctx context.Context) (token int64, unlock func() error, err error)
}

func tokenHolders(t *testing.T, path string) []tokenHolder {
	ctx := ctxTimeout(t, 15*time.Second)
	dc, err := dlock.Connect(ctx, testenv.ZKServers(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.Close() })
	tc, err := teaching.Connect(ctx, testenv.ZKServers(t), 10*time.Second, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.Close() })
	fromTeaching := func(name string, l teaching.Locker) tokenHolder {
		return tokenHolder{name, func(ctx context.Context) (int64, func() error, error) {
			lease, err := l.Lock(ctx)
			if err != nil {
				return 0, nil, err
			}
			return lease.Token(), func() error { return lease.Unlock(context.Background()) }, nil
		}}
	}
	mu := dlock.NewMutex(dc, path)
	return []tokenHolder{
		{"dlock", func(ctx context.Context) (int64, func() error, error) {
			lease, err := mu.Lock(ctx)
			if err != nil {
				return 0, nil, err
			}
			return lease.Token(), func() error { return lease.Unlock(context.Background()) }, nil
		}},
		fromTeaching("herd", teaching.NewHerdLock(tc, path)),
		fromTeaching("spin", teaching.NewSpinLock(tc, path, 5*time.Millisecond)),
		fromTeaching("node-watch", teaching.NewNodeWatchLock(tc, path)),
	}
}

// One lock path, its holders taking turns with every recipe that issues tokens, every recipe
// after every other: each next holder's token is larger than the last, so switching a SKU
// between lock modes never makes the fence refuse the rightful holder. (The herd and fixed-node
// recipes used their node's own creation zxid, far above dlock's path czxid + sequence: dlock's
// next holder was refused.)
func TestTokensGrowWhicheverRecipeHolds(t *testing.T) {
	path := testenv.UniquePath(t)
	holders := tokenHolders(t, path)
	var order []tokenHolder
	for _, a := range holders {
		for _, b := range holders {
			order = append(order, a, b)
		}
	}
	last, lastBy := int64(-1), ""
	for _, h := range order {
		token, unlock, err := h.lock(ctxTimeout(t, 10*time.Second))
		if err != nil {
			t.Fatalf("%s: %v", h.name, err)
		}
		if token <= last {
			t.Errorf("%s's token %d is not above %s's %d before it", h.name, token, lastBy, last)
		}
		last, lastBy = token, h.name
		if err := unlock(); err != nil {
			t.Fatalf("%s unlock: %v", h.name, err)
		}
	}
}

// dlock's Mutex and the herd lock queue together on one path: while they contend, tokens grow in
// the order the lock is granted.
func TestTokensGrowAcrossContendingRecipes(t *testing.T) {
	path := testenv.UniquePath(t)
	var contenders []tokenHolder
	for range 2 {
		contenders = append(contenders, tokenHolders(t, path)[:2]...) // dlock and herd, each its own session
	}
	var mu sync.Mutex
	var tokens []int64
	var by []string
	var wg sync.WaitGroup
	for _, h := range contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				token, unlock, err := h.lock(ctxTimeout(t, 20*time.Second))
				if err != nil {
					t.Errorf("%s: %v", h.name, err)
					return
				}
				mu.Lock() // taken only while holding the lock: the appends are in grant order
				tokens = append(tokens, token)
				by = append(by, h.name)
				mu.Unlock()
				if err := unlock(); err != nil {
					t.Errorf("%s unlock: %v", h.name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("grant %d (%s) has token %d, not above grant %d's (%s) %d", i, by[i], tokens[i], i-1, by[i-1], tokens[i-1])
		}
	}
}
