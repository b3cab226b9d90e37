package order

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// requestLog is the log of one request or batch: its attributes (the SKU, the mode, the key) go on
// every line it writes. Logger.With would format them into a new handler for every request, logged
// or not (8 allocations, about 600 bytes, with the JSON handler), and but for the line that
// answers a purchase, its lines are seldom written; requestLog keeps the attributes as they are
// until a line is. It is passed by value and never shared, so it needs no lock. Unlike With, it
// resolves a slog.LogValuer when a line is written, not when the attribute is bound: the
// attributes here are plain strings and numbers.
type requestLog struct {
	base  *slog.Logger
	attrs [maxRequestAttrs]slog.Attr
	n     int
}

// maxRequestAttrs holds what any request binds (three: a purchase's SKU, mode and key, a cart's
// size, mode and key, a batch purchase's SKU, mode and key), with one to spare.
const maxRequestAttrs = 4

func newRequestLog(base *slog.Logger, attrs ...slog.Attr) requestLog {
	return requestLog{base: base}.with(attrs...)
}

// with is the log with more attributes. Past maxRequestAttrs, those held so far go to the base
// logger's With, in order: that costs what requestLog saves, but loses nothing.
func (l requestLog) with(attrs ...slog.Attr) requestLog {
	for _, a := range attrs {
		if l.n == maxRequestAttrs {
			held := make([]any, 0, l.n)
			for _, h := range l.attrs[:l.n] {
				held = append(held, h)
			}
			l.base = l.base.With(held...)
			l.n = 0
		}
		l.attrs[l.n] = a
		l.n++
	}
	return l
}

func (l requestLog) Debug(msg string, args ...any) { l.write(slog.LevelDebug, msg, args, nil) }
func (l requestLog) Info(msg string, args ...any)  { l.write(slog.LevelInfo, msg, args, nil) }
func (l requestLog) Warn(msg string, args ...any)  { l.write(slog.LevelWarn, msg, args, nil) }

// InfoAttrs is Info for the line every sale writes: attributes given as such are not boxed.
func (l requestLog) InfoAttrs(msg string, attrs ...slog.Attr) {
	l.write(slog.LevelInfo, msg, nil, attrs)
}

// write builds the record as Logger.Log does, with the caller of Debug, Info, Warn or InfoAttrs as
// its source (the wrapping shown in log/slog's documentation), the held attributes first.
func (l requestLog) write(level slog.Level, msg string, args []any, attrs []slog.Attr) {
	ctx := context.Background()
	h := l.base.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // skip Callers, write, and the method that called it
	r := slog.NewRecord(time.Now(), level, msg, pcs[0])
	r.AddAttrs(l.attrs[:l.n]...)
	r.Add(args...)
	r.AddAttrs(attrs...)
	// As in Logger.Log, a handler's error has nowhere to go: the line is lost, not the request.
	_ = h.Handle(ctx, r)
}
