package main

import (
	"github.com/rebucket/rebucket/plan"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFoldLine(t *testing.T) {
	long := "verified in 16ms before publishing: the target's 6,000 entries, read back with every file's checksum checked, then `rebucket load snap-160 --width 40 --into stores` and more words after it"
	got := foldLine(long, 80)
	for _, l := range strings.Split(got, "\n") {
		if utf8.RuneCountInString(l) > 80 {
			t.Errorf("line of %d columns: %q", utf8.RuneCountInString(l), l)
		}
	}
	if !strings.Contains(got, "`rebucket load snap-160 --width 40 --into stores`") {
		t.Errorf("the quoted command was split:\n%s", got)
	}
	if strings.Join(strings.Fields(got), " ") != long {
		t.Errorf("folding changed the words:\n%s", got)
	}
	if s := "  w0   ███ " + strings.Repeat("x", 90); foldLine(s, 80) != s {
		t.Errorf("a chart line was folded")
	}
}

func TestSingular(t *testing.T) {
	for in, want := range map[string]string{
		"1 entries":                                       "1 entry",
		"verified x (1 warnings)":                         "verified x (1 warning)",
		"1 data files and 1 per-worker files":             "1 data file and 1 per-worker file",
		"11 entries, 1,001 entries, 0.1 entries, 21 rows": "11 entries, 1,001 entries, 0.1 entries, 21 rows",
		"NOT verified: 1 errors, 2 warnings":              "NOT verified: 1 error, 2 warnings",
	} {
		if got := singular(in); got != want {
			t.Errorf("singular(%q) = %q, want %q", in, got, want)
		}
	}
}

// Histogram bins narrower than a tenth of their unit get the decimals that
// tell them apart.
func TestBinLabelsDoNotRepeat(t *testing.T) {
	const mib = 1 << 20
	hist := plan.BucketHistogram([]uint64{16 * mib / 10, 16*mib/10 + 20000, 16*mib/10 + 40000, 16*mib/10 + 60000}, 3)
	labels := binLabels(hist)
	seen := map[string]bool{}
	for _, l := range labels {
		lo, hi, _ := strings.Cut(l, "..")
		if lo == hi || seen[lo] {
			t.Errorf("labels %q repeat", labels)
		}
		seen[lo] = true
	}
	if got := binLabels([]plan.Bin{{LoBytes: 5, HiBytes: 5, Buckets: 2}}); got[0] != "5 B" {
		t.Errorf("a one-size bin: %q", got)
	}
}
