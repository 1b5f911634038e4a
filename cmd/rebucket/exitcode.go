package main

import (
	"context"
	"errors"
	"os"

	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
)

// Exit codes: the one table, shown by `rebucket --help` and the README.
const (
	exitOK          = 0   // success
	exitFindings    = 1   // verification found problems
	exitUsage       = 2   // usage error, or input that cannot be read or is damaged
	exitRefused     = 3   // a safety check refused (target exists, disk, width, lock)
	exitFailure     = 4   // failure while working (no space left, I/O error)
	exitInterrupted = 130 // interrupted (Ctrl-C, SIGTERM)
)

const exitCodeTable = `Exit codes:
  0    success
  1    verification findings
  2    usage error, or input that cannot be read or is damaged
  3    refused by a safety check (target exists, not enough disk, width above
       the bucket count under --on-excess reject, another run holds the lock)
  4    failure while working (no space left, I/O error)
  130  interrupted`

// ErrFindings is returned by commands whose check ran and found problems;
// the findings were already printed.
var ErrFindings = errors.New("findings reported")

// usageError marks bad flags or arguments.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// silentError wraps an error whose message was already rendered.
type silentError struct{ error }

func (e silentError) Unwrap() error { return e.error }

func usagef(err error) error { return usageError{err} }

// exitCode maps an error to the documented code. This is the only place.
func exitCode(ctx context.Context, err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return exitInterrupted
	case errors.Is(err, ErrFindings), errors.Is(err, verify.ErrNotEqual):
		return exitFindings
	case errors.As(err, &ue), errors.Is(err, snapshotfmt.ErrInvalidArgument),
		errors.Is(err, snapshotfmt.ErrCorrupt), errors.Is(err, snapshotfmt.ErrNotFound),
		errors.Is(err, snapshotfmt.ErrUnsupported), errors.Is(err, snapshotfmt.ErrTooLarge),
		errors.Is(err, os.ErrNotExist):
		return exitUsage
	case errors.Is(err, snapshotfmt.ErrRefused):
		return exitRefused
	default:
		return exitFailure
	}
}

// exitHint says, for --json errors, what the exit code means for a script.
func exitHint(code int) string {
	switch code {
	case exitFindings:
		return "verification findings: see the findings reported"
	case exitUsage:
		return "fix the command line or the input; see 'rebucket CMD --help'"
	case exitRefused:
		return "a safety check refused: read the message; nothing was written"
	case exitFailure:
		return "failure while working (I/O, no space): nothing was published; retry when resolved"
	case exitInterrupted:
		return "interrupted: nothing was published"
	}
	return ""
}
