package loadtest

import "testing"

// Zipf puts most purchases on a few products; uniform spreads them; a cart's products differ.
func TestPicker(t *testing.T) {
	count := func(cfg Config) map[string]int {
		p := newPicker(cfg, 1)
		n := map[string]int{}
		for i := 0; i < 20000; i++ {
			skus := p.pick(i)
			seen := map[string]bool{}
			for _, s := range skus {
				if seen[s] {
					t.Fatalf("purchase %d lists %s twice: %v", i, s, skus)
				}
				seen[s] = true
				n[s]++
			}
			if len(skus) != max(cfg.Cart, 1) {
				t.Fatalf("purchase %d: %d products, want %d", i, len(skus), max(cfg.Cart, 1))
			}
		}
		return n
	}
	zipf := count(Config{SKU: "Z", Products: 100, Dist: DistZipf, ZipfS: 1.2})
	uniform := count(Config{SKU: "U", Products: 100, Dist: DistUniform})
	if zipf["Z"] < 10*zipf["Z-100"] || zipf["Z"] < 2000 {
		t.Fatalf("zipf: the head %d, the tail %d: not skewed", zipf["Z"], zipf["Z-100"])
	}
	for _, sku := range []string{"U", "U-50", "U-100"} {
		if uniform[sku] < 120 || uniform[sku] > 280 { // 200 expected
			t.Fatalf("uniform: %s picked %d times of 20000 over 100", sku, uniform[sku])
		}
	}
	carts := count(Config{SKU: "C", Products: 10, Cart: 3, Dist: DistZipf, ZipfS: 2})
	if len(carts) < 5 {
		t.Fatalf("carts of 3 from 10 products touched only %d of them", len(carts))
	}
	again := newPicker(Config{SKU: "Z", Products: 100, Dist: DistZipf, ZipfS: 1.2}, 1)
	if a, b := again.pick(7), newPicker(Config{SKU: "Z", Products: 100, Dist: DistZipf, ZipfS: 1.2}, 1).pick(7); a[0] != b[0] {
		t.Fatalf("the same run picks differently: %v %v", a, b)
	}
}
