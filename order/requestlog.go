package order

import (
	"context"
	"log/slog"
)

// requestLog is the log of one request or batch: its attributes (the SKU, the mode, the key) go on
// every line it writes. Logger.With would format them into a new handler for every request, logged
// or not (8 allocations, about 600 bytes, with the JSON handler), and but for the line that
// answers a purchase, its lines are seldom written; requestLog keeps the attributes as they are
// until a line is. It is passed by value and never shared, so it needs no lock.
type requestLog struct {
	base  *slog.Logger
	attrs [maxRequestAttrs]slog.Attr
	n     int
}

// maxRequestAttrs is the most any request carries (a batch's purchase: SKU, mode and key).
const maxRequestAttrs = 4

func newRequestLog(base *slog.Logger, attrs ...slog.Attr) requestLog {
	return requestLog{base: base}.with(attrs...)
}

// with is the log with more attributes. Past maxRequestAttrs, those held so far go to the base
// logger's With, in order: that costs what requestLog saves, but loses nothing.
func (l requestLog) with(attrs ...slog.Attr) requestLog {
	for _, a := range attrs {
		if l.n == maxRequestAttrs {
			l.base = l.base.With(l.args(nil)...)
			l.n = 0
		}
		l.attrs[l.n] = a
		l.n++
	}
	return l
}

func (l requestLog) Debug(msg string, args ...any) { l.log(slog.LevelDebug, msg, args) }
func (l requestLog) Info(msg string, args ...any)  { l.log(slog.LevelInfo, msg, args) }
func (l requestLog) Warn(msg string, args ...any)  { l.log(slog.LevelWarn, msg, args) }

// InfoAttrs is Info for the line every sale writes: attributes given as such cost no boxing.
func (l requestLog) InfoAttrs(msg string, attrs ...slog.Attr) {
	ctx := context.Background()
	if !l.base.Enabled(ctx, slog.LevelInfo) {
		return
	}
	var all [maxRequestAttrs + 8]slog.Attr
	l.base.LogAttrs(ctx, slog.LevelInfo, msg, append(append(all[:0], l.attrs[:l.n]...), attrs...)...)
}

func (l requestLog) log(level slog.Level, msg string, args []any) {
	ctx := context.Background()
	if !l.base.Enabled(ctx, level) {
		return
	}
	l.base.Log(ctx, level, msg, l.args(args)...)
}

// args is the held attributes, then extra, as Logger.Log and Logger.With take them.
func (l requestLog) args(extra []any) []any {
	all := make([]any, 0, l.n+len(extra))
	for _, a := range l.attrs[:l.n] {
		all = append(all, a)
	}
	return append(all, extra...)
}
