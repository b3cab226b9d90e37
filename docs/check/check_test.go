// Package check holds no code: its tests keep the README and the docs consistent with each other,
// without servers: every figure of the README's "numbers at a glance" is in the section it cites,
// a table copied from the benchmarks is copied exactly, every tutorial chapter is listed in order
// and links to the next one, every link between the pages lands on a file and a heading, no
// table cell runs past a paragraph's length, and neither the README nor a chapter states a
// measured time that is neither tied to the doc runner's run (internal/doctest's figures) nor
// dated.
package check_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

var root = filepath.Join("..", "..")

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

var headingRE = regexp.MustCompile("^(#{1,6}) +(.*)$")

// slug is the anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

type heading struct {
	line, level int
	anchor      string
}

// outsideCode says, for each of a page's lines, whether it is prose: outside a code block, and not
// a fence itself.
func outsideCode(lines []string) []bool {
	prose := make([]bool, len(lines))
	fence := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fence = !fence
			continue
		}
		prose[i] = !fence
	}
	return prose
}

// headings are a page's headings outside code blocks, with their anchors (a repeated one gets
// -1, -2, ... as on GitHub).
func headings(lines []string) []heading {
	var hs []heading
	seen := map[string]int{}
	prose := outsideCode(lines)
	for i, l := range lines {
		m := headingRE.FindStringSubmatch(l)
		if !prose[i] || m == nil {
			continue
		}
		a := slug(m[2])
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		hs = append(hs, heading{i, len(m[1]), a})
	}
	return hs
}

// section is the text under the heading with that anchor, up to the next heading of its level or
// above; the whole page for an empty anchor.
func section(t *testing.T, path, anchor string) string {
	t.Helper()
	lines := readLines(t, path)
	if anchor == "" {
		return strings.Join(lines, "\n")
	}
	hs := headings(lines)
	for i, h := range hs {
		if h.anchor != anchor {
			continue
		}
		end := len(lines)
		for _, n := range hs[i+1:] {
			if n.level <= h.level {
				end = n.line
				break
			}
		}
		return strings.Join(lines[h.line:end], "\n")
	}
	t.Fatalf("%s has no heading with the anchor #%s", path, anchor)
	return ""
}

// numberRE finds figures; a number glued to a word (p99, go1, 2f) is a name, not a figure.
var numberRE = regexp.MustCompile(`[\p{L}_]*\d+(?:[.,]\d+)*`)

func figures(s string) []string {
	var out []string
	for _, m := range numberRE.FindAllString(s, -1) {
		if r := []rune(m)[0]; unicode.IsLetter(r) || r == '_' {
			continue
		}
		out = append(out, strings.ReplaceAll(m, ",", ""))
	}
	return out
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// localLink splits a link of a page into the file it names (relative to the repository) and the
// anchor; ok is false for links to other sites.
func localLink(page, target string) (file, anchor string, ok bool) {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return "", "", false
	}
	file, anchor, _ = strings.Cut(target, "#")
	if file == "" {
		file = page
	} else {
		file = filepath.Join(filepath.Dir(page), file)
	}
	return file, anchor, true
}

func cells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(strings.TrimSuffix(row, "|"), "|")
	var cs []string
	for _, c := range strings.Split(row, "|") {
		cs = append(cs, strings.TrimSpace(strings.ReplaceAll(c, "**", "")))
	}
	return cs
}

// TestGlanceFiguresHaveTheirSource: every figure in the answers of the README's "numbers at a
// glance" appears in a section that the row links to, and so does the date the row gives for its
// runs (every row gives one), so the README cannot drift from the run it quotes.
func TestGlanceFiguresHaveTheirSource(t *testing.T) {
	readme := filepath.Join(root, "README.md")
	text := section(t, readme, "the-numbers-at-a-glance")
	rows := 0
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| question") || strings.HasPrefix(l, "| ---") {
			continue
		}
		rows++
		cs := cells(l)
		if len(cs) != 3 {
			t.Errorf("row of %d cells, want question, answer, from: %s", len(cs), l)
			continue
		}
		var sources []string
		for _, m := range linkRE.FindAllStringSubmatch(cs[2], -1) {
			file, anchor, ok := localLink(readme, m[1])
			if !ok {
				continue
			}
			sources = append(sources, section(t, file, anchor))
		}
		if len(sources) == 0 {
			t.Errorf("%q cites no page of the project", cs[0])
			continue
		}
		// the row says when its figures were run, and its source says so too
		dates := dateRE.FindAllString(cs[2], -1)
		if len(dates) == 0 {
			t.Errorf("%q does not say when its figures were run (a date in its from cell)", cs[0])
		}
		for _, d := range dates {
			if !strings.Contains(strings.Join(sources, "\n"), d) {
				t.Errorf("%q: the date %s is not in the section it cites (%s)", cs[0], d, cs[2])
			}
		}
		have := map[string]bool{}
		for _, s := range sources {
			for _, f := range figures(s) {
				have[f] = true
			}
		}
		for _, f := range figures(cs[1]) {
			if !have[f] {
				t.Errorf("%q: the figure %s is not in the section it cites (%s)", cs[0], f, cs[2])
			}
		}
	}
	if rows < 5 {
		t.Fatalf("found %d rows in the README's numbers at a glance; the table moved?", rows)
	}
}

var dateRE = regexp.MustCompile(`\b20\d\d-\d\d-\d\d\b`)

var fromRE = regexp.MustCompile(`^<!-- from: (\S+) -->$`)

// TestCopiedTablesMatchTheirSource: a table after <!-- from: PAGE#ANCHOR --> in the README or the
// docs copies rows of a table in that section; each row must equal the source's row of the same
// first cell, cell by cell (bold aside).
func TestCopiedTablesMatchTheirSource(t *testing.T) {
	copies := 0
	for _, page := range docPages(t) {
		lines := readLines(t, page)
		for i, l := range lines {
			m := fromRE.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			copies++
			file, anchor, _ := localLink(page, m[1])
			source := map[string][]string{}
			for _, sl := range strings.Split(section(t, file, anchor), "\n") {
				if strings.HasPrefix(sl, "|") {
					cs := cells(sl)
					source[cs[0]] = cs
				}
			}
			n := 0
			for _, row := range lines[i+1:] {
				if !strings.HasPrefix(row, "|") {
					break
				}
				cs := cells(row)
				if strings.HasPrefix(cs[0], "---") {
					continue
				}
				n++
				if want, ok := source[cs[0]]; !ok {
					t.Errorf("%s:%d: row %q is in no table of %s", page, i+1, cs[0], m[1])
				} else if !slices.Equal(cs, want) {
					t.Errorf("%s:%d: row %q differs from its source %s:\n got  %q\n want %q", page, i+1, cs[0], m[1], cs, want)
				}
			}
			if n < 2 {
				t.Errorf("%s:%d: no table follows the from line", page, i+1)
			}
		}
	}
	if copies == 0 {
		t.Fatal("no <!-- from: ... --> table found: the README's demo table lost its source")
	}
}

// chapters are the tutorial's chapter files in order (NN-name.md), whatever their number.
func chapters(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "docs", "tutorial", "[0-9][0-9]-*.md"))
	if err != nil || len(paths) < 2 {
		t.Fatalf("tutorial chapters: %v %v", paths, err)
	}
	slices.Sort(paths)
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	return names
}

// listed is the chapter files that a text links to, in the order of the links.
func listed(text, prefix string) []string {
	re := regexp.MustCompile(`\]\(` + regexp.QuoteMeta(prefix) + `(\d\d-[^)#]+\.md)\)`)
	var names []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		names = append(names, m[1])
	}
	return names
}

// TestEveryChapterListedInOrder: the README's "Learn it" and the tutorial index's "The chapters" list every chapter
// once, in order.
func TestEveryChapterListedInOrder(t *testing.T) {
	want := chapters(t)
	if got := listed(section(t, filepath.Join(root, "README.md"), "learn-it"), "docs/tutorial/"); !slices.Equal(got, want) {
		t.Errorf("the README's Learn it lists\n %v\nwant every chapter in order:\n %v", got, want)
	}
	index := section(t, filepath.Join(root, "docs", "tutorial", "README.md"), "the-chapters")
	if got := listed(index, ""); !slices.Equal(got, want) {
		t.Errorf("docs/tutorial/README.md lists\n %v\nwant every chapter in order:\n %v", got, want)
	}
}

// TestEveryChapterLinksToTheNext: each chapter has one "Next:" line, and its link is the next
// chapter; the last one's is the index.
func TestEveryChapterLinksToTheNext(t *testing.T) {
	names := chapters(t)
	for i, name := range names {
		want := "README.md"
		if i+1 < len(names) {
			want = names[i+1]
		}
		var next []string
		for _, l := range readLines(t, filepath.Join(root, "docs", "tutorial", name)) {
			if strings.HasPrefix(l, "Next:") {
				next = append(next, l)
			}
		}
		if len(next) != 1 {
			t.Errorf("%s has %d lines starting with Next:, want one linking to %s", name, len(next), want)
			continue
		}
		m := linkRE.FindStringSubmatch(next[0])
		if m == nil || m[1] != want {
			t.Errorf("%s: %q, want its link to be %s", name, next[0], want)
		}
	}
}

// docPages are the README and every Markdown page under docs/, at any depth.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// TestLinksLand: every relative link from the README and the docs (docs/**/*.md) names a file
// that exists, and an anchor that one of its headings has.
func TestLinksLand(t *testing.T) {
	for _, page := range docPages(t) {
		lines := readLines(t, page)
		prose := outsideCode(lines)
		for i, l := range lines {
			if !prose[i] {
				continue
			}
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				file, anchor, ok := localLink(page, m[1])
				if !ok {
					continue
				}
				st, err := os.Stat(file)
				if err != nil {
					t.Errorf("%s:%d: link %s: %v", page, i+1, m[1], err)
					continue
				}
				if anchor == "" || st.IsDir() || !strings.HasSuffix(file, ".md") {
					continue
				}
				found := false
				for _, h := range headings(readLines(t, file)) {
					found = found || h.anchor == anchor
				}
				if !found {
					t.Errorf("%s:%d: link %s: %s has no heading with that anchor", page, i+1, m[1], file)
				}
			}
		}
	}
}

// indexSetup is the setup the tutorial index gives for the local demo: the commands of the first
// sh block of its "Setup" section, comments dropped.
func indexSetup(t *testing.T) []string {
	t.Helper()
	var cmds []string
	in := false
	for _, l := range strings.Split(section(t, filepath.Join(root, "docs", "tutorial", "README.md"), "setup"), "\n") {
		switch {
		case !in && strings.HasPrefix(l, "```sh"):
			in = true
		case in && strings.HasPrefix(l, "```"):
			return cmds
		case in:
			if cmd, _, _ := strings.Cut(l, "#"); strings.TrimSpace(cmd) != "" {
				cmds = append(cmds, strings.TrimSpace(cmd))
			}
		}
	}
	t.Fatal("docs/tutorial/README.md's Setup section has no sh block")
	return nil
}

// TestEveryChapterStartsWithItsSetup: a reader who lands on a chapter (from the README, say)
// learns before its first command what to run first and where the index is: the text before the
// first code block links to the index and, for a chapter on the local demo (no <!-- needs: -->
// line), names every command of the index's setup.
func TestEveryChapterStartsWithItsSetup(t *testing.T) {
	setup := indexSetup(t)
	if len(setup) == 0 {
		t.Fatal("the index's setup has no commands")
	}
	for _, name := range chapters(t) {
		lines := readLines(t, filepath.Join(root, "docs", "tutorial", name))
		var intro []string
		local := true
		for _, l := range lines {
			if strings.HasPrefix(l, "```") || strings.HasPrefix(l, "<!-- run") {
				break
			}
			if strings.HasPrefix(l, "<!-- needs:") {
				local = false
			}
			intro = append(intro, l)
		}
		text := strings.Join(intro, "\n")
		linked := false
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			file, _, _ := strings.Cut(m[1], "#")
			linked = linked || file == "README.md"
		}
		if !linked {
			t.Errorf("%s: no link to the index (README.md) before its first command", name)
		}
		for _, cmd := range setup {
			if local && !strings.Contains(text, cmd) {
				t.Errorf("%s: the setup %q is not said before its first command", name, cmd)
			}
		}
	}
}

var notRunLine = regexp.MustCompile(`^<!-- not run: \S.* -->$`)

// TestEveryChapterCommandIsRunOrSaysWhyNot: the index says the doc runner runs the chapters'
// commands; so every sh block of a chapter is a runnable step (<!-- run -->, or <!-- run: NEEDS -->
// for one that another test runs), or is marked <!-- not run: WHY --> (what it costs, or why it
// cannot run unattended), which the index names.
func TestEveryChapterCommandIsRunOrSaysWhyNot(t *testing.T) {
	// the index's paragraph that says which blocks are not run, and links to their chapters
	var notRun string
	for _, p := range strings.Split(strings.Join(readLines(t, filepath.Join(root, "docs", "tutorial", "README.md")), "\n"), "\n\n") {
		if strings.Contains(p, "not run") {
			notRun += p
		}
	}
	for _, name := range chapters(t) {
		lines := readLines(t, filepath.Join(root, "docs", "tutorial", name))
		for i, l := range lines {
			if !strings.HasPrefix(l, "```sh") {
				continue
			}
			prev := ""
			if i > 0 {
				prev = lines[i-1]
			}
			switch {
			case strings.HasPrefix(prev, "<!-- run"):
			case notRunLine.MatchString(prev):
				if !strings.Contains(notRun, "]("+name) {
					t.Errorf("%s:%d: a block not run, which the index's paragraph on what is not run does not link to", name, i+1)
				}
			default:
				t.Errorf("%s:%d: a sh block neither run (<!-- run -->) nor marked <!-- not run: WHY -->", name, i+1)
			}
		}
	}
}

// maxCellWords is the most words a table cell holds: a row of a reference table is one or two
// sentences; what needs more is a section under the table, and a measurement belongs in
// docs/benchmarks.md or docs/reliability.md, linked.
const maxCellWords = 60

// linkTargetRE is a link's target, which a reader does not read as words.
var linkTargetRE = regexp.MustCompile(`\]\([^)]*\)`)

// TestTableCellsAreShort: no table cell of the README or the docs (docs/**/*.md), outside code
// blocks, is over maxCellWords words (a link counts by its text).
func TestTableCellsAreShort(t *testing.T) {
	for _, page := range docPages(t) {
		lines := readLines(t, page)
		prose := outsideCode(lines)
		for i, l := range lines {
			if !prose[i] || !strings.HasPrefix(strings.TrimSpace(l), "|") {
				continue
			}
			for _, c := range cells(l) {
				if n := len(strings.Fields(linkTargetRE.ReplaceAllString(c, "]"))); n > maxCellWords {
					t.Errorf("%s:%d: a table cell of %d words (at most %d: split the row, or move the detail to a section under the table): %.80s...",
						page, i+1, n, maxCellWords, c)
				}
			}
		}
	}
}
