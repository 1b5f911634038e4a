// Package progress is how long-running library work reports progress
// without printing: the library calls a Reporter, the command renders it.
package progress

import "sync"

// Reporter receives progress of one piece of work measured in units
// (bytes, unless started with StartUnit). Implementations must be safe for
// concurrent Add calls. A Start while a piece of work is running ends it
// and begins the next phase.
type Reporter interface {
	// Start announces the total in bytes (0 if unknown) and a short
	// description.
	Start(total int64, what string)
	// Add reports n more units done.
	Add(n int64)
	// Finish ends the piece of work.
	Finish()
}

// Unit is what a phase counts.
type Unit string

// The units of the phases.
const (
	Bytes   Unit = "bytes"
	Entries Unit = "entries"
	Rows    Unit = "rows"
	Workers Unit = "workers"
	Files   Unit = "files"
)

// UnitReporter is a Reporter that renders counts other than bytes.
type UnitReporter interface {
	Reporter
	// StartUnit is Start with the unit of total and of every Add.
	StartUnit(total int64, what string, unit Unit)
}

// StartUnit begins a phase of r that counts unit. A Reporter that is no
// UnitReporter gets Start, so that it still sees the phase.
func StartUnit(r Reporter, total int64, what string, unit Unit) {
	if u, ok := r.(UnitReporter); ok {
		u.StartUnit(total, what, unit)
		return
	}
	r.Start(total, what)
}

// Nop discards progress.
type Nop struct{}

func (Nop) Start(int64, string)           {}
func (Nop) StartUnit(int64, string, Unit) {}
func (Nop) Add(int64)                     {}
func (Nop) Finish()                       {}

// OrNop returns r, or Nop when r is nil.
func OrNop(r Reporter) Reporter {
	if r == nil {
		return Nop{}
	}
	return r
}

// Phase is one phase a Recorder saw.
type Phase struct {
	What  string
	Total int64
	Unit  Unit
	Done  int64
	// Finished is set once Finish (or the next Start) ended the phase.
	Finished bool
}

// Recorder is a Reporter that records the phases it sees, for tests.
type Recorder struct {
	mu     sync.Mutex
	phases []Phase
}

func (r *Recorder) Start(total int64, what string) { r.StartUnit(total, what, Bytes) }

func (r *Recorder) StartUnit(total int64, what string, unit Unit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finishLocked()
	r.phases = append(r.phases, Phase{What: what, Total: total, Unit: unit})
}

func (r *Recorder) Add(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := len(r.phases) - 1; k >= 0 {
		r.phases[k].Done += n
	}
}

func (r *Recorder) Finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finishLocked()
}

func (r *Recorder) finishLocked() {
	if k := len(r.phases) - 1; k >= 0 {
		r.phases[k].Finished = true
	}
}

// Phases returns what was recorded so far.
func (r *Recorder) Phases() []Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Phase(nil), r.phases...)
}
