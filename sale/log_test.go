package sale

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// A Log writes the lines Logger.With would have written, attribute for attribute and in
// the same order, at the levels the handler lets through, and nothing below them.
func TestRequestLogWritesWhatWithWould(t *testing.T) {
	var got, want bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: dropTime}
	base := slog.New(slog.NewJSONHandler(&got, opts)).With("replica", "order1")
	with := slog.New(slog.NewJSONHandler(&want, opts)).With("replica", "order1")

	l := NewLog(base, slog.String("sku", "sku-1"), slog.String("mode", "zk"), slog.String("request_id", "k1"))
	w := with.With("sku", "sku-1", "mode", "zk", "request_id", "k1")
	l.Info("purchase", "result", "created", "order", int64(7))
	w.Info("purchase", "result", "created", "order", int64(7))
	l.InfoAttrs("purchase", slog.String("result", "created"), slog.Int64("order", 8))
	w.Info("purchase", "result", "created", "order", int64(8))
	l.Debug("lock release pending") // below the level: neither writes it
	w.Debug("lock release pending")
	l.Warn("purchase failed", "code", "lock_lost")
	w.Warn("purchase failed", "code", "lock_lost")

	// The mode as the service binds it, a LockMode, prints as With printed it.
	NewLog(base, slog.String("mode", string(ModeZK))).Info("mode")
	with.With("mode", ModeZK).Info("mode")

	// Under a group the attributes go into the group, as With's do.
	NewLog(base.WithGroup("g"), slog.String("sku", "sku-1")).Warn("grouped", "n", 1)
	with.WithGroup("g").With("sku", "sku-1").Warn("grouped", "n", 1)

	// Past maxRequestAttrs the attributes go through With, still in order.
	more := l.With(slog.Int("a", 1), slog.Int("b", 2))
	more.Info("more", "c", 3)
	w.With("a", 1, "b", 2).Info("more", "c", 3)

	// And the source is the line that logged, not Log's own.
	var src bytes.Buffer
	NewLog(slog.New(slog.NewJSONHandler(&src, &slog.HandlerOptions{AddSource: true}))).Info("where")
	if !strings.Contains(src.String(), "log_test.go") {
		t.Fatalf("source of the line: %s, want log_test.go", src.String())
	}

	if got.String() != want.String() {
		t.Fatalf("Log wrote\n%s\nLogger.With wrote\n%s", got.String(), want.String())
	}
	if n := strings.Count(got.String(), "\n"); n != 6 {
		t.Fatalf("%d lines written, want 6:\n%s", n, got.String())
	}
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// The cost per purchase of the request's log: its attributes bound (Log, or Logger.With as
// before) and the line that answers a sale written.
func BenchmarkRequestLog(b *testing.B) {
	base := slog.New(slog.NewJSONHandler(io.Discard, nil)).With("replica", "order1")
	b.Run("Log", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			l := NewLog(base, slog.String("sku", "sku-0001"), slog.String("mode", "zk"), slog.String("request_id", "f0e1d2c3b4a5968778695a4b3c2d1e0f"))
			l.InfoAttrs("purchase", slog.String("result", "created"), slog.Int64("order", int64(i)), slog.Int64("token", 5), slog.Int64("remaining", 9))
		}
	})
	b.Run("With", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			l := base.With("sku", "sku-0001", "mode", LockMode("zk"), "request_id", "f0e1d2c3b4a5968778695a4b3c2d1e0f")
			l.Info("purchase", "result", "created", "order", int64(i), "token", int64(5), "remaining", int64(9))
		}
	})
}
