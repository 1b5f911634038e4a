package reader

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Pebble ends the process on some errors: its Logger's Fatalf is called
// when a MANIFEST write fails (a full disk), and, unless an EventListener
// says otherwise, on any corruption it reads ("on-disk corruption"). A
// library must never end the process, and a damaged input or a full disk
// must come back as an error that the command maps to its exit code after
// removing its temporary directory and lock. So the stores that load
// builds and checks:
//
//   - see only tables that every check of the reader has passed first
//     (Loader.validateTable), so Pebble's own reads never meet damage;
//   - report corruption through the returned error, not the listener;
//   - run no background work (no automatic compactions, no table
//     statistics), so Pebble's fatal paths run only on the goroutine that
//     called it;
//   - turn Fatalf into a panic carrying the error, which guardPebble
//     recovers at the call into Pebble and returns (with the panics Pebble
//     raises itself, on a failed directory fsync).
//
// After a fatal error Pebble's state is undefined (a mutex may be held):
// the store is abandoned, never closed, and the caller removes its
// directory.

// pebbleFatal is the panic value of fatalLogger.Fatalf.
type pebbleFatal struct{ err error }

// fatalError keeps the error Pebble's Fatalf was given (ENOSPC, a
// corruption mark) reachable by errors.Is under Pebble's message.
type fatalError struct {
	msg   string
	cause error
}

func (e *fatalError) Error() string { return e.msg }
func (e *fatalError) Unwrap() error { return e.cause }

// fatalLogger is quiet (a library never prints) and never exits.
type fatalLogger struct{}

func (fatalLogger) Infof(string, ...any)  {}
func (fatalLogger) Errorf(string, ...any) {}
func (fatalLogger) Fatalf(format string, args ...any) {
	fe := &fatalError{msg: "pebble: " + fmt.Sprintf(format, args...)}
	for _, a := range args {
		if e, ok := a.(error); ok {
			fe.cause = e
			break
		}
	}
	panic(pebbleFatal{fe})
}

// safeStoreOptions are StoreOptions for the stores load builds and reads
// back (see above); fs, when set, is the file system Pebble uses (tests
// inject faults through it).
func safeStoreOptions(fs vfs.FS, readOnly bool) *pebble.Options {
	o := StoreOptions()
	o.Logger = fatalLogger{}
	o.EventListener = &pebble.EventListener{DataCorruption: func(pebble.DataCorruptionInfo) {}}
	o.DisableAutomaticCompactions = true
	o.DisableTableStats = true
	o.ReadOnly = readOnly
	if fs != nil {
		o.FS = fs
	}
	return o
}

// errPebbleFatal marks an error that Pebble treated as fatal: its store
// must be abandoned.
var errPebbleFatal = errors.New("the store was abandoned")

// guardPebble runs fn, which calls into Pebble, and returns a fatal error
// of Pebble's as an error (errors.Is errPebbleFatal): a Fatalf, and also a
// panic, which Pebble raises itself on a failed directory fsync ("fsync
// errors are unrecoverable"): the error it carries (ENOSPC, EIO) stays
// reachable by errors.Is.
func guardPebble(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			switch v := p.(type) {
			case pebbleFatal:
				err = v.err
			case error:
				err = &fatalError{msg: "pebble: " + v.Error(), cause: v}
			default:
				err = fmt.Errorf("pebble panicked: %v", v)
			}
			err = fmt.Errorf("%w (%w)", err, errPebbleFatal)
		}
	}()
	return fn()
}

// storeErr classifies an error from a store: corruption that Pebble
// reports is damage (ErrCorrupt, exit 2); anything else (no space, I/O)
// is a failure while working.
func storeErr(what string, err error) error {
	if err == nil || errors.Is(err, snapshotfmt.ErrCorrupt) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: %s: %v", snapshotfmt.ErrCorrupt, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// safeStore is a Pebble store opened with safeStoreOptions.
type safeStore struct {
	db        *pebble.DB
	abandoned bool
}

// openSafeStore opens (or creates) the store at dir.
func openSafeStore(dir string, fs vfs.FS, readOnly bool) (*safeStore, error) {
	st := &safeStore{}
	err := guardPebble(func() error {
		db, err := pebble.Open(dir, safeStoreOptions(fs, readOnly))
		st.db = db
		return err
	})
	if err != nil {
		return nil, storeErr("open store "+dir, err)
	}
	return st, nil
}

// do runs fn on the store; a fatal error abandons it.
func (s *safeStore) do(what string, fn func(db *pebble.DB) error) error {
	if s.abandoned {
		return fmt.Errorf("%s: %w", what, errPebbleFatal)
	}
	err := guardPebble(func() error { return fn(s.db) })
	if errors.Is(err, errPebbleFatal) {
		s.abandoned = true
	}
	return storeErr(what, err)
}

// Close closes the store unless it was abandoned.
func (s *safeStore) Close(what string) error {
	if s.abandoned {
		return nil
	}
	return s.do(what, func(db *pebble.DB) error { return db.Close() })
}

// tableCheck is the outcome of validating one data file, computed once
// per Loader whichever worker asks first.
type tableCheck struct {
	once sync.Once
	err  error
}

// validateTable reads a data file through every check a reader applies
// (the whole-file checksum; in FileIter, each record a set of a decodable
// key in its bucket and inside the file's bounds, the listed count; no
// range blocks) and then checks the checksum of every block, the filter
// blocks that an iteration never reads included: load hands whole files
// to Pebble, and what Pebble ingests it trusts.
func (l *Loader) validateTable(ctx context.Context, df snapshotfmt.DataFile) error {
	v, _ := l.tables.LoadOrStore(df.Path, &tableCheck{})
	tc := v.(*tableCheck)
	tc.once.Do(func() { tc.err = l.validate(ctx, df) })
	return tc.err
}

func (l *Loader) validate(ctx context.Context, df snapshotfmt.DataFile) (err error) {
	fi, err := l.openChecked(ctx, df, nil, nil)
	if err != nil {
		return err
	}
	defer fi.Close()
	var n uint64
	for fi.Next() {
		if n++; n&65535 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if err := fi.Err(); err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: the table reader panicked: %v", snapshotfmt.ErrCorrupt, df.Path, p)
		}
	}()
	if err := fi.r.ValidateBlockChecksums(); err != nil {
		return tableErr(df.Path, err)
	}
	return nil
}
