package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
)

// Distributions of purchases over the catalogue (-dist).
const (
	DistUniform = "uniform"
	DistZipf    = "zipf" // a hot head and a long tail: product k is bought about 1/(k+1)^s as often as the first
)

// picker chooses the products of each purchase: always the same for the same run seed and
// purchase, so that a run can be repeated.
type picker struct {
	skus []string
	cart int
	dist string
	s    float64
	seed uint64
}

func newPicker(cfg Config, seed uint64) *picker {
	return &picker{skus: cfg.SKUs(), cart: max(cfg.Cart, 1), dist: cfg.Dist, s: cfg.ZipfS, seed: seed}
}

// pick is purchase i's products: one, or a cart of distinct ones. A cart of the whole catalogue
// lists it in an order of its own for each purchase (the service must lock in one order whatever
// the client's).
func (p *picker) pick(i int) []string {
	n := len(p.skus)
	if p.cart >= n {
		out := make([]string, n)
		for j := range out {
			out[j] = p.skus[(i+j)%n]
		}
		if i%2 == 1 {
			slices.Reverse(out)
		}
		return out
	}
	rng := rand.New(rand.NewPCG(p.seed, uint64(i)))
	draw := func() int { return rng.IntN(n) }
	if p.dist == DistZipf {
		z := rand.NewZipf(rng, p.s, 1, uint64(n-1))
		draw = func() int { return int(z.Uint64()) }
	}
	seen := map[int]bool{}
	out := make([]string, 0, p.cart)
	for tries := 0; len(out) < p.cart && tries < 100*p.cart; tries++ {
		k := draw()
		if !seen[k] {
			seen[k] = true
			out = append(out, p.skus[k])
		}
	}
	for k := 0; len(out) < p.cart; k++ { // a tail too thin to draw from: fill in order
		if !seen[k] {
			seen[k] = true
			out = append(out, p.skus[k])
		}
	}
	return out
}

// forEachSKU runs f for every product, 16 at a time (a catalogue of thousands is reset and
// audited through the HTTP API).
func forEachSKU(ctx context.Context, skus []string, f func(ctx context.Context, sku string) error) error {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, sku := range skus {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		wg.Add(1)
		go func(sku string) {
			defer func() { <-sem; wg.Done() }()
			if err := f(ctx, sku); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", sku, err))
				mu.Unlock()
			}
		}(sku)
	}
	wg.Wait()
	return errors.Join(errs...)
}
