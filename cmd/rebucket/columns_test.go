package main

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// A run through the story in a terminal: every human line fits 80
// columns, no histogram label repeats its bound, no Go slice is printed.
func TestHumanOutputFits80Columns(t *testing.T) {
	t.Chdir(t.TempDir())
	foldAlways = true // as on a terminal
	t.Cleanup(func() { foldAlways = false })
	goSlice := regexp.MustCompile(`\[\d+( \d+)+\]|\[[a-z]+( [a-z]+)+\]`)
	sameBounds := regexp.MustCompile(`(\d+(?:\.\d+)? [KMGT]?i?B)\.\.(\d+(?:\.\d+)? [KMGT]?i?B)`)
	for _, args := range [][]string{
		{"generate", "--out", "snap", "--buckets", "64", "--width", "4", "--entries", "3000"},
		{"inspect", "snap"},
		{"plan", "snap", "--widths", "4,100"},
		{"plan", "--recommend", "--peak-width", "100"},
		{"plan", "snap", "--buckets", "7"},
		{"verify", "snap", "--width", "100"},
		{"rewrite", "snap", "--buckets", "400", "--out", "snap-400"},
		{"verify", "snap-400", "--against", "snap"},
		{"verify", "snap-400"},
		{"load", "snap-400", "--width", "100", "--into", "stores"},
		{"load", "snap", "--width", "100", "--into", "stores2"},
		{"export", "snap", "--out", "snap.parquet"},
	} {
		out, errOut, code := runCLI(t, args...)
		if code != exitOK && code != exitFindings && code != exitRefused {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		for _, line := range strings.Split(out+errOut, "\n") {
			if n := utf8.RuneCountInString(line); n > 80 {
				t.Errorf("%v: a line of %d columns:\n%s", args, n, line)
			}
			if goSlice.MatchString(line) {
				t.Errorf("%v: a Go slice printed: %s", args, line)
			}
			for _, m := range sameBounds.FindAllStringSubmatch(line, -1) {
				if m[1] == m[2] {
					t.Errorf("%v: a label repeats its bound: %s", args, line)
				}
			}
		}
	}
}
