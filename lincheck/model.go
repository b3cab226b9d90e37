// Package lincheck records a concurrent history of purchases, carts, cancellations and stock reads
// against order replicas over HTTP, and checks it for linearizability with Porcupine
// (github.com/anishathalye/porcupine) against a sequential model of the stock of two SKUs.
//
// Linearizable means: every operation appears to take effect at one instant between its call and
// its return, and the answers are those of some one-at-a-time order of those instants. For a
// shop's stock: every "remaining" a sale or a cancellation answers, and every stock a read
// answers, is what the stock was right after some serial order of the operations that respects
// real time; and an out_of_stock answer was true at its instant.
//
// The package speaks HTTP only and knows nothing of how the service locks: the model below is the
// whole specification.
package lincheck

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation does.
type Kind uint8

const (
	// Buy is a purchase of one SKU: POST /v1/orders {"sku","qty"}.
	Buy Kind = iota
	// Cart is a purchase of both SKUs at once, all or nothing: POST /v1/orders {"items":[...]}.
	Cart
	// Cancel restocks one of the client's own accepted orders: POST /v1/orders/:id/cancel.
	Cancel
	// Read is GET /v1/products/:sku.
	Read
)

func (k Kind) String() string {
	switch k {
	case Buy:
		return "buy"
	case Cart:
		return "cart"
	case Cancel:
		return "cancel"
	case Read:
		return "read"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Input is an operation as it was asked for.
type Input struct {
	Kind Kind
	SKU  int      // 0 or 1: the SKU of a Buy, Cancel or Read
	Qty  [2]int64 // units per SKU: Qty[SKU] for a Buy or Cancel, both for a Cart
}

// Result is how an operation ended.
type Result uint8

const (
	// OK: the operation took effect (201 for a purchase, 200 for a cancellation or a read).
	OK Result = iota
	// OutOfStock: 409 out_of_stock, nothing sold.
	OutOfStock
	// Unknown: an answer that says the outcome is not known (outcome_unknown, an internal error),
	// or none (a timeout, a cut connection). It may or may not have taken effect, at any time
	// after its call: its return is the end of the history.
	Unknown
	// Applied: an operation of unknown outcome that a retry with the same key, after the history,
	// found done before ("replayed"). It took effect at some time after its call; what it left is
	// not known, and its return is the end of the history.
	Applied
	// Refused: an answer that says nothing was changed, other than out_of_stock (503
	// storage_unavailable, lock_lost, a 4xx: internal/answers). It changed nothing, and is left
	// out of the history; its promise is checked by its key after the history.
	Refused
)

// Output is what an operation answered.
type Output struct {
	Result Result
	// Remaining is the stock after the operation (OK): Remaining[SKU] for a Buy, Cancel or Read,
	// both for a Cart. A cancellation the service confirmed without knowing the stock (-1) is
	// not checked.
	Remaining [2]int64
	// Short is the SKU a Cart's out_of_stock named, or -1 when it named none of the two.
	Short int
	// Answer is the HTTP status and code, for descriptions ("201", "503 stale_token", "cut").
	Answer string
}

// State is the stock of the two SKUs.
type State [2]int64

// Step is the sequential specification: the states the stock can be in after the operation with
// the given output, from state s; none when the output is impossible from s.
func Step(s State, in Input, out Output) []State {
	switch in.Kind {
	case Buy:
		q := in.Qty[in.SKU]
		enough := s[in.SKU] >= q
		after := s
		after[in.SKU] -= q
		switch out.Result {
		case OK:
			if enough && out.Remaining[in.SKU] == after[in.SKU] {
				return []State{after}
			}
		case OutOfStock:
			if !enough {
				return []State{s}
			}
		case Unknown, Applied:
			return unsure(out.Result, enough, s, after)
		}
	case Cart:
		enough := s[0] >= in.Qty[0] && s[1] >= in.Qty[1]
		after := State{s[0] - in.Qty[0], s[1] - in.Qty[1]}
		switch out.Result {
		case OK:
			if enough && out.Remaining == after {
				return []State{after}
			}
		case OutOfStock:
			// All or nothing: refused only if an item was short, and the one it names was.
			if out.Short >= 0 && s[out.Short] < in.Qty[out.Short] || out.Short < 0 && !enough {
				return []State{s}
			}
		case Unknown, Applied:
			return unsure(out.Result, enough, s, after)
		}
	case Cancel:
		after := s
		after[in.SKU] += in.Qty[in.SKU]
		switch out.Result {
		case OK:
			if out.Remaining[in.SKU] < 0 || out.Remaining[in.SKU] == after[in.SKU] {
				return []State{after}
			}
		case Unknown:
			return []State{s, after}
		case Applied:
			return []State{after}
		}
	case Read:
		if out.Result == OK && out.Remaining[in.SKU] == s[in.SKU] {
			return []State{s}
		}
	}
	return nil
}

// unsure is a sale of unknown outcome: it may have taken effect or not, if there was enough; found
// done after the history (Applied), it did, and needed enough.
func unsure(r Result, enough bool, s, after State) []State {
	switch {
	case !enough && r == Applied:
		return nil
	case !enough:
		return []State{s}
	case r == Applied:
		return []State{after}
	}
	return []State{s, after}
}

// Model is the Porcupine model of the stock of two SKUs named skus, each starting at stock units.
// It is nondeterministic (an operation of unknown outcome may or may not have taken effect), by the
// power-set construction of porcupine.NondeterministicModel.ToModel, written out so that the
// common case, one possible state, costs no allocation of a set: a model state is a State when
// one stock is possible, and a states (a sorted set, as a string) when several are.
func Model(skus [2]string, stock int64) porcupine.Model {
	describe := func(s State) string { return fmt.Sprintf("%s=%d %s=%d", skus[0], s[0], skus[1], s[1]) }
	return porcupine.Model{
		Init: func() any { return State{stock, stock} },
		Step: func(state, input, output any) (bool, any) {
			next := stepSet(state, input.(Input), output.(Output))
			return next != nil, next
		},
		Hash: func(state any) uint64 {
			switch s := state.(type) {
			case State:
				return uint64(s[0])*0x9e3779b97f4a7c15 ^ uint64(s[1])
			default:
				var h uint64 = 14695981039346656037 // FNV-1a
				for _, c := range []byte(s.(states)) {
					h = (h ^ uint64(c)) * 1099511628211
				}
				return h
			}
		},
		DescribeOperation: func(input, output any) string { return Describe(skus, input.(Input), output.(Output)) },
		DescribeState: func(state any) string {
			var parts []string
			for _, s := range members(state) {
				parts = append(parts, describe(s))
			}
			if len(parts) == 1 {
				return parts[0]
			}
			return "one of {" + strings.Join(parts, "; ") + "}"
		},
		DescribeOperationMetadata: func(info any) string {
			if info == nil {
				return ""
			}
			return fmt.Sprint(info)
		},
	}
}

// states is a set of two or more States, sorted, 16 bytes each: comparable, so that the checker's
// == on states works.
type states string

// members is a model state's States.
func members(state any) []State {
	if s, ok := state.(State); ok {
		return []State{s}
	}
	b := []byte(state.(states))
	out := make([]State, len(b)/16)
	for i := range out {
		out[i] = State{int64(binary.BigEndian.Uint64(b[16*i:])), int64(binary.BigEndian.Uint64(b[16*i+8:]))}
	}
	return out
}

// stepSet is Step on a model state: the union of the steps of its members, nil if empty.
func stepSet(state any, in Input, out Output) any {
	if s, ok := state.(State); ok {
		next := Step(s, in, out)
		switch len(next) {
		case 0:
			return nil
		case 1:
			return next[0]
		}
		return setOf(next)
	}
	var next []State
	for _, s := range members(state) {
		next = append(next, Step(s, in, out)...)
	}
	if len(next) == 0 {
		return nil
	}
	return setOf(next)
}

// setOf is the model state of a non-empty list of States: a State if they are all one.
func setOf(list []State) any {
	slices.SortFunc(list, func(a, b State) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	list = slices.Compact(list)
	if len(list) == 1 {
		return list[0]
	}
	b := make([]byte, 0, 16*len(list))
	for _, s := range list {
		b = binary.BigEndian.AppendUint64(b, uint64(s[0]))
		b = binary.BigEndian.AppendUint64(b, uint64(s[1]))
	}
	return states(b)
}

// Describe is one operation as the visualization shows it, e.g. "buy A×2 → 201, A=17".
func Describe(skus [2]string, in Input, out Output) string {
	var b strings.Builder
	switch in.Kind {
	case Buy, Cancel:
		fmt.Fprintf(&b, "%s %s×%d", in.Kind, skus[in.SKU], in.Qty[in.SKU])
	case Cart:
		fmt.Fprintf(&b, "cart %s×%d %s×%d", skus[0], in.Qty[0], skus[1], in.Qty[1])
	case Read:
		fmt.Fprintf(&b, "read %s", skus[in.SKU])
	}
	b.WriteString(" → ")
	switch out.Result {
	case OK:
		switch in.Kind {
		case Cart:
			fmt.Fprintf(&b, "%s, %s=%d %s=%d", out.Answer, skus[0], out.Remaining[0], skus[1], out.Remaining[1])
		case Read:
			fmt.Fprintf(&b, "%d", out.Remaining[in.SKU])
		default:
			if out.Remaining[in.SKU] < 0 {
				fmt.Fprintf(&b, "%s, %s=?", out.Answer, skus[in.SKU])
			} else {
				fmt.Fprintf(&b, "%s, %s=%d", out.Answer, skus[in.SKU], out.Remaining[in.SKU])
			}
		}
	case OutOfStock:
		b.WriteString("out of stock")
		if in.Kind == Cart && out.Short >= 0 {
			fmt.Fprintf(&b, " (%s)", skus[out.Short])
		}
	case Unknown:
		fmt.Fprintf(&b, "? (%s)", out.Answer)
	case Applied:
		fmt.Fprintf(&b, "done, when unknown (%s)", out.Answer)
	case Refused:
		fmt.Fprintf(&b, "nothing changed (%s)", out.Answer)
	}
	return b.String()
}
