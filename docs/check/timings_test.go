package check_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zkstock/zkstock/internal/doctest"
)

var (
	// measuredRE is a time someone measured: one with a fraction ("0.79 s"), or one after a
	// percentile, "max", "took" or "within" ("p99 of 2 s", "took 55 s"). A whole number of
	// seconds alone is most often a setting ("for 3 s", "every 10 ms"), and is not looked at.
	measuredRE = regexp.MustCompile(`\b(?:(?:p50|p90|p95|p99|max|took|within)\s+(?:of\s+)?\d[\d,]*(?:\.\d+)?|\d[\d,]*\.\d+)(?:\s?[–-]\s?\d[\d,]*(?:\.\d+)?)?\s?(?:ms|s|µs|min|minutes|seconds)\b`)
	// settingRE is a setting's name, or a default: the times of a clause that names one are a
	// setting's values ("45.2 s with the defaults", "`LOCK_TIMEOUT` 5 s"), not measurements
	settingRE = regexp.MustCompile("`[A-Z][A-Z0-9]*_[A-Z0-9_]+`|\\bdefaults?\\b")
	// unreadRE is what a check of the prose does not read: code spans and HTML comments
	unreadRE = regexp.MustCompile("`[^`]*`|<!--.*?-->")
)

// block is a paragraph, a list or a table of a page (lines between blank lines, outside code
// blocks), joined by spaces.
type block struct {
	text string
	line []int // line[i] is the page's line of text[i]
}

func blocks(lines []string) []block {
	var bs []block
	var cur block
	prose := outsideCode(lines)
	for i, l := range lines {
		if !prose[i] || strings.TrimSpace(l) == "" {
			if cur.text != "" {
				bs = append(bs, cur)
			}
			cur = block{}
			continue
		}
		if cur.text != "" {
			cur.text += " "
			cur.line = append(cur.line, i+1)
		}
		cur.text += l
		for range len(l) {
			cur.line = append(cur.line, i+1)
		}
	}
	if cur.text != "" {
		bs = append(bs, cur)
	}
	return bs
}

// blank is s with what re matches turned into spaces, byte for byte.
func blank(re *regexp.Regexp, s string) string {
	return re.ReplaceAllStringFunc(s, func(m string) string { return strings.Repeat(" ", len(m)) })
}

// clauseEndRE ends a clause: a comma, a semicolon, a colon, a parenthesis, a dash or a sentence's
// full stop (not a decimal point).
var clauseEndRE = regexp.MustCompile(`[,;:()—]|\.(?:\s|$)`)

// clause is the clause of text around [start, end).
func clause(text string, start, end int) string {
	from := 0
	for _, at := range clauseEndRE.FindAllStringIndex(text[:start], -1) {
		from = at[1]
	}
	to := len(text)
	if at := clauseEndRE.FindStringIndex(text[end:]); at != nil {
		to = end + at[0]
	}
	return text[from:to]
}

// dated says whether a block states when its figures were run: it gives a date, or links to a
// section of the project's pages that does.
func dated(t *testing.T, page, text string) bool {
	if dateRE.MatchString(text) {
		return true
	}
	for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
		file, anchor, ok := localLink(page, m[1])
		if ok && strings.HasSuffix(file, ".md") && dateRE.MatchString(section(t, file, anchor)) {
			return true
		}
	}
	return false
}

// TestMeasuredTimesAreTiedOrDated: every time the README or a chapter gives as measured (see
// measuredRE) is tied to the doc runner's run of the page (a figure's mark, internal/doctest), or
// its paragraph says when it was run (a date, or a link to a section that gives one; a table
// counts with the paragraph before it): a timing on the 2 shared cores varies too much between
// runs to be stated bare. (The reference pages under docs/ date their measurements by section,
// which this does not read.)
func TestMeasuredTimesAreTiedOrDated(t *testing.T) {
	pages := []string{filepath.Join(root, "README.md")}
	for _, name := range chapters(t) {
		pages = append(pages, filepath.Join(root, "docs", "tutorial", name))
	}
	for _, page := range pages {
		caption := false // the paragraph before a table is dated
		for _, b := range blocks(readLines(t, page)) {
			isTable := strings.HasPrefix(b.text, "|")
			ok := dated(t, page, b.text) || isTable && caption
			if !isTable {
				caption = ok
			}
			if ok {
				continue
			}
			for _, at := range bareTimes(b.text) {
				t.Errorf("%s:%d: %q is a measured time neither tied to the run (<!-- figure: -->, internal/doctest) nor dated (the command and date it came from)",
					page, b.line[at[0]], b.text[at[0]:at[1]])
			}
		}
	}
}

// bareTimes are where a text gives a measured time that no mark ties to a run, nor a setting's
// name or a default in its clause makes a setting's value.
func bareTimes(text string) [][]int {
	var bare [][]int
	read := blank(unreadRE, doctest.Untied(text))
	for _, at := range measuredRE.FindAllStringIndex(read, -1) {
		if !settingRE.MatchString(clause(text, at[0], at[1])) {
			bare = append(bare, at)
		}
	}
	return bare
}

func TestBareTimesAreTheMeasuredOnes(t *testing.T) {
	for text, want := range map[string]string{
		"its 100 units took 0.79 s, and the buyers waited up to 0.45 s.":       "took 0.79 s|0.45 s",
		"answered in 2.4 ms at p99; the p99 of 2 s against a p95 of 0.4 s":     "2.4 ms|p99 of 2 s|p95 of 0.4 s",
		"answered within 0.47 s of the first sale, 1.5–2.2 s at p50":           "within 0.47 s|1.5–2.2 s",
		"the first took 55 s on the machine":                                   "took 55 s",
		"100 units to 300 buyers a second for 3 s, a poller every 10 ms":       "",
		"2 s of release, 45.2 s with the defaults, plus":                       "",
		"the queue budget (2.5 s by default, half of `LOCK_TIMEOUT`)":          "",
		"`WORK_DELAY` 2.5 ms; `-duration 4.5s`":                                "",
		"sold out at 1.1 s<!-- =zk-out -->, 0.9–1.6 s<!-- =zk-out --> in runs": "",
	} {
		var got []string
		for _, at := range bareTimes(text) {
			got = append(got, text[at[0]:at[1]])
		}
		if strings.Join(got, "|") != want {
			t.Errorf("bare times of %q: %q, want %q", text, got, want)
		}
	}
}
