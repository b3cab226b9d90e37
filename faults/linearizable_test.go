package faults

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zkstock/zkstock/lincheck"
)

// Every scenario with buyers also records a history with lincheck while it breaks things: six
// more clients buy, buy carts, cancel their own orders and read the stock of two products of their
// own (F-LIN-A and F-LIN-B), on the same replicas, through the same fault. When the buyers halt,
// Porcupine checks that history against the sequential model of the two products' stock: in the
// locked modes (zk, zk-batch) it must be linearizable whatever broke. A history that is not (or
// that Porcupine cannot decide in time) fails the scenario and leaves its visualization in
// out/porcupine/<test>-<mode>.html.

// linHistory is the history recorded beside one scenario's buyers.
type linHistory struct {
	r    *replica // for its test
	mode string
	rec  *lincheck.Recorder
}

// Under the race detector Porcupine runs about four times slower: a switch history of 2,500
// operations that it decided in 29 s outside was still undecided after a minute inside (CI).
const linCheckTimeout = 3 * time.Minute

// modeOf is the LOCK_MODE a replica was started with (zk by default).
func modeOf(r *replica) string {
	mode := "zk"
	for _, kv := range r.env {
		if m, ok := strings.CutPrefix(kv, "LOCK_MODE="); ok {
			mode = m
		}
	}
	return mode
}

// startHistory starts recording beside the buyers, when the replicas run a locked mode.
func startHistory(rs []*replica) *linHistory {
	if len(rs) == 0 || !slices.Contains(lockedModes, modeOf(rs[0])) {
		return nil
	}
	t := rs[0].t
	t.Helper()
	var urls []string
	for _, r := range rs {
		urls = append(urls, r.url)
	}
	rec, err := lincheck.Start(context.Background(), lincheck.Config{Replicas: urls, AdminToken: "faults",
		SKUs: [2]string{"F-LIN-A", "F-LIN-B"}, Stock: 30, MaxQty: 2, Clients: 6, Pause: 50 * time.Millisecond,
		MaxOps: 2000, RequestTimeout: 60 * time.Second})
	if err != nil {
		t.Errorf("start the linearizability history: %v", err)
		return nil
	}
	return &linHistory{r: rs[0], mode: modeOf(rs[0]), rec: rec}
}

// check stops the history's clients and checks what they saw.
func (l *linHistory) check() {
	if l == nil {
		return
	}
	t := l.r.t
	t.Helper()
	h, err := l.rec.Stop()
	if err != nil {
		t.Errorf("linearizability history: %v", err)
		return
	}
	judgeHistory(t, l.mode, h)
}

// judgeHistory checks a history with Porcupine, and on a failure saves it beside its
// visualization in out/porcupine/<test>.
func judgeHistory(t *testing.T, mode string, h *lincheck.History) {
	t.Helper()
	v := h.Check(linCheckTimeout)
	st := h.Stats
	t.Logf("linearizability (%s): %d operations checked; %d answers of unknown outcome, of which a retry found %d done and %d not done; Porcupine: %s in %v; answers %v",
		mode, st.Ops, st.Unknown, st.FoundDone, st.FoundNotDone, v.Outcome, v.CheckTime.Round(time.Millisecond), st.Answers)
	if st.BadRequests > 0 || st.BadAnswers > 0 {
		t.Errorf("linearizability history: %d requests answered 400 and %d answers without the documented fields:\n%s",
			st.BadRequests, st.BadAnswers, strings.Join(st.Problems, "\n"))
	}
	for _, b := range h.Broken {
		t.Errorf("a broken promise in %s: %s", mode, b)
	}
	if v.Outcome == porcupine.Ok {
		return
	}
	path := filepath.Join("..", "out", "porcupine", strings.ReplaceAll(t.Name(), "/", "-")+".html")
	if err := h.WriteFile(strings.TrimSuffix(path, ".html") + ".json"); err != nil {
		t.Errorf("save the history: %v", err)
	}
	if err := v.Visualize(path); err != nil {
		t.Errorf("the history beside the buyers is %s, not linearizable; its visualization could not be written: %v", v.Outcome, err)
		return
	}
	abs, _ := filepath.Abs(path)
	t.Errorf("the history beside the buyers is %s, not linearizable in %s: Porcupine's visualization in %s (the history beside it, .json, for lincheck -check)", v.Outcome, mode, abs)
}
