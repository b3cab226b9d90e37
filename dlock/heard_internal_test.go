package dlock

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// The scanner hands over each frame's head whatever the chunks the bytes arrive in: one byte at a
// time, a frame split anywhere, several frames in one read.
func TestFrameScannerAcrossChunks(t *testing.T) {
	bodies := [][]byte{{}, {1, 2, 3}, make([]byte, frameHeadLen), make([]byte, 300), {9}}
	for i, b := range bodies {
		for j := range b {
			b[j] = byte(i*31 + j)
		}
	}
	var stream []byte
	var want [][]byte
	for _, b := range bodies {
		stream = binary.BigEndian.AppendUint32(stream, uint32(len(b)))
		stream = append(stream, b...)
		want = append(want, b[:min(len(b), frameHeadLen)])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var s frameScanner
		var got [][]byte
		rest := stream
		for len(rest) > 0 {
			n := 1 + rng.IntN(len(rest))
			if round == 0 {
				n = 1
			}
			s.feed(rest[:n], func(head []byte) { got = append(got, slices.Clone(head)) })
			rest = rest[n:]
		}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("round %d: heads %v, want %v", round, got, want)
		}
	}
}
