package sale

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// Log is the log of one request or batch: its attributes (the SKU, the mode, the key) go on
// every line it writes. Logger.With would format them into a new handler for every request, logged
// or not (8 allocations, about 600 bytes, with the JSON handler), and but for the line that
// answers a purchase, its lines are seldom written; Log keeps the attributes as they are
// until a line is. It is passed by value and never shared, so it needs no lock. Unlike
// Logger.With, it
// resolves a slog.LogValuer when a line is written, not when the attribute is bound: the
// attributes here are plain strings and numbers.
type Log struct {
	base  *slog.Logger
	attrs [maxRequestAttrs]slog.Attr
	n     int
}

// maxRequestAttrs holds what any request binds (three: a purchase's SKU, mode and key, a cart's
// size, mode and key, a batch purchase's SKU, mode and key), with one to spare.
const maxRequestAttrs = 4

// NewLog is base's log of one request, with its attributes.
func NewLog(base *slog.Logger, attrs ...slog.Attr) Log {
	return Log{base: base}.With(attrs...)
}

// With is the log with more attributes. Past maxRequestAttrs, those held so far go to the base
// logger's With, in order: that costs what Log saves, but loses nothing.
func (l Log) With(attrs ...slog.Attr) Log {
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

// Debug, Info and Warn write a line with the log's attributes first, as Logger's do.
func (l Log) Debug(msg string, args ...any) { l.write(slog.LevelDebug, msg, args, nil) }
func (l Log) Info(msg string, args ...any)  { l.write(slog.LevelInfo, msg, args, nil) }
func (l Log) Warn(msg string, args ...any)  { l.write(slog.LevelWarn, msg, args, nil) }

// InfoAttrs is Info for the line every sale writes: attributes given as such are not boxed.
func (l Log) InfoAttrs(msg string, attrs ...slog.Attr) {
	l.write(slog.LevelInfo, msg, nil, attrs)
}

// write builds the record as Logger.Log does, with the caller of Debug, Info, Warn or InfoAttrs as
// its source (the wrapping shown in log/slog's documentation), the held attributes first.
func (l Log) write(level slog.Level, msg string, args []any, attrs []slog.Attr) {
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
