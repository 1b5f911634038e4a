package main

import (
	"fmt"
	"io"
	"strings"
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
