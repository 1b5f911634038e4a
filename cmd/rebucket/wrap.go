package main

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// termWidth is the width human reports fit in.
const termWidth = 80

// wrapWriter passes human output through, folding every line longer than
// termWidth at spaces, continuation lines indented two more than the line.
// A `quoted command` is never split, so it stays copy-pasteable; chart
// lines (bars) are drawn to fit and pass as they are.
type wrapWriter struct {
	w     io.Writer
	buf   []byte
	width int // 0: lines are not folded (not a terminal)
}

// foldAlways folds output that is not a terminal too (tests).
var foldAlways bool

// newWrapWriter folds lines when w is a terminal (a pipe gets whole lines,
// for grep) and makes counts of one singular everywhere.
func newWrapWriter(w io.Writer) *wrapWriter { return &wrapWriter{w: w, width: foldWidth(w)} }

// foldWidth is the width to fold output to w at: termWidth on a terminal
// (or the terminal's, when it is narrower), 0 for no folding elsewhere.
func foldWidth(w io.Writer) int {
	if foldAlways {
		return termWidth
	}
	f, ok := w.(*os.File)
	if !ok || !isTerminal(w) {
		return 0
	}
	if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols >= 40 && cols < termWidth {
		return cols
	}
	return termWidth
}

func (ww *wrapWriter) Write(p []byte) (int, error) {
	ww.buf = append(ww.buf, p...)
	for {
		i := bytes.IndexByte(ww.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(ww.buf[:i])
		ww.buf = ww.buf[i+1:]
		if _, err := io.WriteString(ww.w, foldLine(singular(line), ww.width)+"\n"); err != nil {
			return len(p), err
		}
	}
}

// Flush writes a last line without a newline.
func (ww *wrapWriter) Flush() {
	if len(ww.buf) > 0 {
		_, _ = io.WriteString(ww.w, foldLine(singular(string(ww.buf)), ww.width))
		ww.buf = nil
	}
}

// foldLine folds one line to width columns (see wrapWriter).
func foldLine(line string, width int) string {
	if width <= 0 || utf8.RuneCountInString(line) <= width || strings.ContainsRune(line, '█') {
		return line
	}
	indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
	hang := indent + "  "
	var b strings.Builder
	cur, curLen, empty := indent, len(indent), true
	for _, word := range foldWords(strings.TrimLeft(line, " ")) {
		n := utf8.RuneCountInString(word)
		if !empty && curLen+1+n > width {
			b.WriteString(cur + "\n")
			cur, curLen, empty = hang, len(hang), true
		}
		if !empty {
			cur += " "
			curLen++
		}
		cur += word
		curLen += n
		empty = false
	}
	b.WriteString(cur)
	return b.String()
}

// foldWords splits s at spaces, keeping a `quoted span` as one word.
func foldWords(s string) []string {
	var words []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '`':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		words = append(words, cur.String())
	}
	return words
}

// oneOf matches a count of exactly one before a plural noun of the
// reports ("1 entries", "(1 warnings)", "1 data files").
var oneOf = regexp.MustCompile(`(^|[^0-9.,])1 (data |per-worker |sorted |worker )?(entries|rows|errors|warnings|buckets|files|items|workers|differences|runs|states|keys)\b`)

var singulars = map[string]string{
	"entries": "entry", "rows": "row", "errors": "error", "warnings": "warning", "buckets": "bucket",
	"files": "file", "items": "item", "workers": "worker", "differences": "difference", "runs": "run",
	"states": "state", "keys": "key",
}

// singular makes every count of one in a human line singular, in one place
// for every report: "1 entry", not "1 entries".
func singular(line string) string {
	return oneOf.ReplaceAllStringFunc(line, func(m string) string {
		sub := oneOf.FindStringSubmatch(m)
		return sub[1] + "1 " + sub[2] + singulars[sub[3]]
	})
}
