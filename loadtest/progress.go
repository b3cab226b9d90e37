package loadtest

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// NewProgress draws a progress bar on a terminal and prints plain lines (every tenth) otherwise,
// so logs and CI output stay readable.
func NewProgress(w io.Writer) Progress {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &barProgress{w: w}
	}
	return &lineProgress{w: w}
}

type barProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (p *barProgress) Start(mode string, total int) {
	p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(fmt.Sprintf("%-12s", mode)),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("req"),
		progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100_000_000), progressbar.OptionClearOnFinish())
}

func (p *barProgress) Add(n int) { _ = p.bar.Add(n) }
func (p *barProgress) Finish()   { _ = p.bar.Finish() }

type lineProgress struct {
	w           io.Writer
	mu          sync.Mutex
	mode        string
	total, done int
	nextTenth   int
}

func (p *lineProgress) Start(mode string, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.total, p.done, p.nextTenth = mode, total, 0, 1
	fmt.Fprintf(p.w, "%s: %d requests\n", mode, total)
}

func (p *lineProgress) Add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	for p.nextTenth <= 10 && p.done*10 >= p.total*p.nextTenth {
		fmt.Fprintf(p.w, "%s: %d/%d\n", p.mode, p.done, p.total)
		p.nextTenth++
	}
}

func (p *lineProgress) Finish() {}

// NoProgress reports nothing.
type NoProgress struct{}

func (NoProgress) Start(string, int) {}
func (NoProgress) Add(int)           {}
func (NoProgress) Finish()           {}
