package lincheck

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

var skus = [2]string{"A", "B"}

func buy(sku int, qty int64) Input {
	in := Input{Kind: Buy, SKU: sku}
	in.Qty[sku] = qty
	return in
}

func cancelIn(sku int, qty int64) Input {
	in := Input{Kind: Cancel, SKU: sku}
	in.Qty[sku] = qty
	return in
}

func read(sku int) Input { return Input{Kind: Read, SKU: sku} }

func left(sku int, n int64) Output {
	o := Output{Result: OK, Short: -1, Answer: "201"}
	o.Remaining[sku] = n
	return o
}

var (
	soldOut = Output{Result: OutOfStock, Short: -1, Answer: "409 out_of_stock"}
	unknown = Output{Result: Unknown, Short: -1, Answer: "503 outcome_unknown"}
)

// op is an operation from call to ret.
func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
}

func TestModel(t *testing.T) {
	const end = 1000 // an unknown outcome's return: the end of the history
	cases := []struct {
		name  string
		stock int64
		ops   []porcupine.Operation
		want  porcupine.CheckResult
	}{
		{"one after another", 3, []porcupine.Operation{
			op(0, 0, 1, buy(0, 2), left(0, 1)),
			op(1, 2, 3, buy(0, 2), soldOut),
			op(0, 4, 5, cancelIn(0, 2), left(0, 3)),
			op(1, 6, 7, read(0), left(0, 3)),
			op(1, 8, 9, read(1), left(1, 3)),
		}, porcupine.Ok},
		{"concurrent sales in either order", 10, []porcupine.Operation{
			op(0, 0, 10, buy(0, 1), left(0, 8)),
			op(1, 1, 9, buy(0, 1), left(0, 9)),
		}, porcupine.Ok},
		{"lost update: two sales from 10 both leave 9", 10, []porcupine.Operation{
			op(0, 0, 10, buy(0, 1), left(0, 9)),
			op(1, 1, 9, buy(0, 1), left(0, 9)),
		}, porcupine.Illegal},
		{"stale read after a sale returned", 10, []porcupine.Operation{
			op(0, 0, 1, buy(0, 1), left(0, 9)),
			op(1, 2, 3, read(0), left(0, 10)),
		}, porcupine.Illegal},
		{"out of stock while there was stock", 10, []porcupine.Operation{
			op(0, 0, 1, buy(1, 2), soldOut),
		}, porcupine.Illegal},
		{"a remaining that skips a unit", 10, []porcupine.Operation{
			op(0, 0, 1, buy(0, 1), left(0, 8)),
		}, porcupine.Illegal},
		{"a cancel's remaining counts the restock", 4, []porcupine.Operation{
			op(0, 0, 1, buy(0, 2), left(0, 2)),
			op(0, 2, 3, cancelIn(0, 2), left(0, 3)),
		}, porcupine.Illegal},
		{"a cancel confirmed without the stock (-1)", 4, []porcupine.Operation{
			op(0, 0, 1, buy(0, 2), left(0, 2)),
			op(0, 2, 3, cancelIn(0, 2), left(0, -1)),
			op(0, 4, 5, read(0), left(0, 4)),
		}, porcupine.Ok},
		{"an unknown sale that took effect, even after its answer", 5, []porcupine.Operation{
			op(0, 0, end, buy(0, 2), unknown),
			op(1, 10, 11, read(0), left(0, 5)),
			op(1, 12, 13, read(0), left(0, 3)),
		}, porcupine.Ok},
		{"an unknown sale that did not", 5, []porcupine.Operation{
			op(0, 0, end, buy(0, 2), unknown),
			op(1, 10, 11, buy(0, 5), left(0, 0)),
		}, porcupine.Ok},
		{"an unknown sale cannot explain a unit too many", 5, []porcupine.Operation{
			op(0, 0, end, buy(0, 2), unknown),
			op(1, 10, 11, read(0), left(0, 2)),
		}, porcupine.Illegal},
		{"a sale found done later, placed where the stock covered it", 2, []porcupine.Operation{
			op(0, 0, end, buy(0, 2), Output{Result: Applied, Short: -1}),
			op(1, 1, 2, read(0), left(0, 2)),
			op(1, 3, 4, read(0), left(0, 0)),
		}, porcupine.Ok},
		{"a sale found done that the stock never covered", 1, []porcupine.Operation{
			op(0, 0, end, buy(0, 2), Output{Result: Applied, Short: -1}),
		}, porcupine.Illegal},
		{"a cart sells both or neither", 5, []porcupine.Operation{
			op(0, 0, 1, Input{Kind: Cart, Qty: [2]int64{2, 1}}, Output{Result: OK, Remaining: [2]int64{3, 4}, Short: -1}),
			op(1, 2, 3, Input{Kind: Cart, Qty: [2]int64{1, 5}}, Output{Result: OutOfStock, Short: 1}),
			op(1, 4, 5, read(0), left(0, 3)),
		}, porcupine.Ok},
		{"a cart refused naming the SKU that had enough", 5, []porcupine.Operation{
			op(1, 2, 3, Input{Kind: Cart, Qty: [2]int64{1, 6}}, Output{Result: OutOfStock, Short: 0}),
		}, porcupine.Illegal},
		{"a half-sold cart", 5, []porcupine.Operation{
			op(0, 0, end, Input{Kind: Cart, Qty: [2]int64{2, 1}}, unknown),
			op(1, 2, 3, read(0), left(0, 3)),
			op(1, 4, 5, read(1), left(1, 5)),
		}, porcupine.Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &History{SKUs: skus, Stock: c.stock, Ops: c.ops}
			v := h.Check(10 * time.Second)
			if v.Outcome != c.want {
				t.Fatalf("Porcupine says %s, want %s", v.Outcome, c.want)
			}
		})
	}
}

// Several unknown outcomes make a set of possible stocks; later reads narrow it down.
func TestModelSets(t *testing.T) {
	const end = 1000
	ops := []porcupine.Operation{
		op(0, 0, end, buy(0, 1), unknown),
		op(1, 0, end, buy(0, 2), unknown),
		op(2, 0, end, Input{Kind: Cart, Qty: [2]int64{1, 1}}, unknown),
		op(3, 1, end, cancelIn(1, 3), unknown),
	}
	for _, c := range []struct {
		a, b int64
		want porcupine.CheckResult
	}{{10, 10, porcupine.Ok}, {6, 9, porcupine.Ok}, {9, 12, porcupine.Ok}, {7, 12, porcupine.Ok}, {5, 10, porcupine.Illegal}, {8, 11, porcupine.Illegal}, {10, 9, porcupine.Illegal}} {
		// A, then B, then A again: the cart cannot fall between the reads of A unseen.
		h := &History{SKUs: skus, Stock: 10, Ops: append(slices.Clone(ops),
			op(4, 10, 11, read(0), left(0, c.a)), op(4, 12, 13, read(1), left(1, c.b)), op(4, 14, 15, read(0), left(0, c.a)))}
		if v := h.Check(10 * time.Second); v.Outcome != c.want {
			t.Errorf("reads A=%d B=%d: Porcupine says %s, want %s", c.a, c.b, v.Outcome, c.want)
		}
	}
}

// A history saved and read back checks the same.
func TestHistoryFile(t *testing.T) {
	h := &History{SKUs: skus, Stock: 10, Ops: []porcupine.Operation{
		op(0, 0, 10, buy(0, 1), left(0, 9)),
		op(1, 1, 9, buy(0, 1), left(0, 9)),
		op(2, 1, 1000, Input{Kind: Cart, Qty: [2]int64{1, 2}}, unknown),
	}, Annotations: []porcupine.Annotation{{Tag: "lock mode", Start: 5, End: 6, Description: "→ zk"}}}
	for i := range h.Ops {
		h.Ops[i].Metadata = "replica 1, key k" // the recorder's metadata is a string
	}
	path := filepath.Join(t.TempDir(), "h", "history.json")
	if err := h.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Fatalf("read back %+v\nwant %+v", got, h)
	}
	if v := got.Check(10 * time.Second); v.Outcome != porcupine.Illegal {
		t.Fatalf("read back, the lost update is %s", v.Outcome)
	}
}
