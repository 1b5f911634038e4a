package main

import (
	"fmt"
	"io"
	"strings"

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
func drawBars(w io.Writer, rows []barRow, width int) {
	var top float64
	lw := 0
	for _, r := range rows {
		top = max(top, r.value)
		lw = max(lw, len(r.label))
	}
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
	rows := make([]barRow, len(hist))
	for i, bin := range hist {
		rows[i] = barRow{
			label: fmt.Sprintf("%s..%s", units.Bytes(int64(bin.LoBytes)), units.Bytes(int64(bin.HiBytes))),
			value: float64(bin.Buckets), note: fmt.Sprintf("%d buckets", bin.Buckets),
		}
	}
	drawBars(w, rows, 40)
}
