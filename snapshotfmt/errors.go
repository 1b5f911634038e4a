package snapshotfmt

import "errors"

// Error classes. Every error the packages return that a caller may need to
// tell apart wraps one of these, so a command maps it to an exit code with
// errors.Is, in one place.
var (
	// ErrCorrupt marks a snapshot (or a file in it) that is damaged or does
	// not follow this format: a torn manifest, a checksum mismatch, an entry
	// outside its declared range.
	ErrCorrupt = errors.New("snapshot is corrupt")

	// ErrUnsupported marks a well-formed snapshot of a format name or version
	// this build does not read.
	ErrUnsupported = errors.New("unsupported snapshot format")

	// ErrTooLarge marks a manifest or item above a hard size bound, refused
	// before anything large is allocated.
	ErrTooLarge = errors.New("too large")

	// ErrNotFound marks a path that is not a snapshot at all (no manifest).
	ErrNotFound = errors.New("not a snapshot")

	// ErrRefused marks a safety check that stopped a run before it changed
	// anything: the target exists, another run holds the lock, not enough
	// disk, a width above the bucket count under the reject policy.
	ErrRefused = errors.New("refused")

	// ErrInvalidArgument marks a request that cannot be satisfied as asked
	// (a bucket count out of range, an unknown mapping name).
	ErrInvalidArgument = errors.New("invalid argument")
)
