package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/plan"
)

// barRow is one labelled bar of a terminal chart.
type barRow struct {
	label string
	value float64
	note  string
}

// drawBars renders rows as horizontal bars scaled to width characters.
// The bars shrink (to 10 at least) so that every line fits termWidth.
func drawBars(w io.Writer, rows []barRow, width int) {
	var top float64
	lw, nw := 0, 0
	for _, r := range rows {
		top = max(top, r.value)
		lw = max(lw, utf8.RuneCountInString(r.label))
		nw = max(nw, utf8.RuneCountInString(r.note))
	}
	width = max(10, min(width, termWidth-2-lw-1-1-nw))
	for _, r := range rows {
		n := 0
		if top > 0 {
			n = int(r.value / top * float64(width))
		}
		if n == 0 && r.value > 0 {
			n = 1
		}
		fmt.Fprintf(w, "  %-*s %s%s %s\n", lw, r.label, strings.Repeat("█", n), strings.Repeat(" ", width-n), r.note)
	}
}

// renderBucketSizes draws bucket sizes: a bar per bucket for a few
// buckets, else a histogram of their sizes.
func renderBucketSizes(w io.Writer, bb []uint64) {
	fmt.Fprintf(w, "\nbucket sizes (logical bytes)\n")
	if len(bb) <= 32 {
		rows := make([]barRow, len(bb))
		for b, v := range bb {
			rows[b] = barRow{label: fmt.Sprintf("bucket %d", b), value: float64(v), note: units.Bytes(int64(v))}
		}
		drawBars(w, rows, 40)
		return
	}
	hist := plan.BucketHistogram(bb, 10)
	labels := binLabels(hist)
	rows := make([]barRow, len(hist))
	for i, bin := range hist {
		rows[i] = barRow{label: labels[i], value: float64(bin.Buckets), note: countOf(int64(bin.Buckets), "bucket", "buckets")}
	}
	drawBars(w, rows, 40)
}

// binLabels names the histogram's bins LO..HI with as many decimals as it
// takes for no label to repeat a bound (1.6 MiB..1.6 MiB), and a bin of
// one size by that size alone.
func binLabels(hist []plan.Bin) []string {
	labels := make([]string, len(hist))
	for prec := 1; prec <= 4; prec++ {
		ok, seen := true, map[string]bool{}
		for i, bin := range hist {
			lo, hi := bytesPrec(int64(bin.LoBytes), prec), bytesPrec(int64(bin.HiBytes), prec)
			switch {
			case bin.LoBytes == bin.HiBytes:
				labels[i] = lo
			case lo == hi:
				ok = false
			default:
				labels[i] = lo + ".." + hi
			}
			if seen[lo] {
				ok = false
			}
			seen[lo] = true
		}
		if ok {
			break
		}
	}
	return labels
}

// bytesPrec is units.Bytes with prec decimals.
func bytesPrec(n int64, prec int) string {
	if prec == 1 || n < 1024 {
		return units.Bytes(n)
	}
	v := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		v /= 1024
		if v < 1024 {
			return strconv.FormatFloat(v, 'f', prec, 64) + " " + u
		}
	}
	return units.Bytes(n)
}

// countOf is "1 entry", "2,000 entries".
func countOf(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return units.Count(uint64(n)) + " " + many
}
