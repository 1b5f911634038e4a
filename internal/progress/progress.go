// Package progress is how long-running library work reports progress
// without printing: the library calls a Reporter, the command renders it.
package progress

// Reporter receives progress of one piece of work measured in units
// (usually bytes). Implementations must be safe for concurrent Add calls.
type Reporter interface {
	// Start announces the total (0 if unknown) and a short description.
	Start(total int64, what string)
	// Add reports n more units done.
	Add(n int64)
	// Finish ends the piece of work.
	Finish()
}

// Nop discards progress.
type Nop struct{}

func (Nop) Start(int64, string) {}
func (Nop) Add(int64)           {}
func (Nop) Finish()             {}

// OrNop returns r, or Nop when r is nil.
func OrNop(r Reporter) Reporter {
	if r == nil {
		return Nop{}
	}
	return r
}
