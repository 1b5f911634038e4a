package main

import (
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/rebucket/rebucket/internal/progress"
)

// barReporter renders the phases of a piece of work as labelled bars on a
// terminal: the phase, done/total in the phase's unit (bytes in IEC units,
// as every report), the rate and the time left.
type barReporter struct {
	w   io.Writer
	mu  sync.Mutex
	bar *progressbar.ProgressBar
	// eager renders every change (tests); a terminal gets 10 a second.
	eager bool
}

func (b *barReporter) Start(total int64, what string) { b.StartUnit(total, what, progress.Bytes) }

func (b *barReporter) StartUnit(total int64, what string, unit progress.Unit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		_ = b.bar.Finish()
	}
	b.bar = newBar(b.w, total, what, unit, b.eager)
}

// newBar is the bar of one phase.
func newBar(w io.Writer, total int64, what string, unit progress.Unit, eager bool) *progressbar.ProgressBar {
	if total <= 0 {
		total = -1 // unknown: a spinner with the count
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionSetWidth(24),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetRenderBlankState(true),
	}
	if !eager {
		opts = append(opts, progressbar.OptionThrottle(100*time.Millisecond))
	}
	if unit == progress.Bytes || unit == "" {
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true))
	} else {
		opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString(string(unit)))
	}
	return progressbar.NewOptions64(total, opts...)
}

func (b *barReporter) Add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		_ = b.bar.Add64(n)
	}
}

func (b *barReporter) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		_ = b.bar.Finish()
		b.bar = nil
	}
}

// relabel gives every phase of r the label what (e.g. the self-check of a
// rewrite, whose library names its phase "fingerprint").
func relabel(r progress.Reporter, what string) progress.Reporter {
	return relabelled{progress.OrNop(r), what}
}

type relabelled struct {
	progress.Reporter
	what string
}

func (l relabelled) Start(total int64, _ string) {
	progress.StartUnit(l.Reporter, total, l.what, progress.Bytes)
}

func (l relabelled) StartUnit(total int64, _ string, unit progress.Unit) {
	progress.StartUnit(l.Reporter, total, l.what, unit)
}
