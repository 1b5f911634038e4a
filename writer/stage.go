package writer

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Errors of publication. Each wraps snapshotfmt.ErrRefused.
var (
	ErrTargetExists = fmt.Errorf("%w: target exists and is not empty", snapshotfmt.ErrRefused)
	ErrLocked       = fmt.Errorf("%w: another run holds the lock on the target", snapshotfmt.ErrRefused)
)

// MarkerName is the file inside a temporary directory that names the run
// building it; a directory without one is never removed automatically.
const MarkerName = ".rebucket-run"

const tmpInfix = ".rebucket-tmp-"

// Marker is the content of MarkerName.
type Marker struct {
	RunID   string    `json:"run_id"`
	PID     int       `json:"pid"`
	BootID  string    `json:"boot_id,omitempty"`
	Started time.Time `json:"started"`
	Target  string    `json:"target"`
}

// Stage is a temporary directory beside a target that becomes the target by
// rename. It holds a lock on the target until Publish or Abort.
//
// Write ordering: everything under Dir is written and fsynced by the caller
// (or by Snapshot); Publish removes the marker, fsyncs the directory, renames
// it into place and fsyncs the parent. A crash before the rename leaves only
// a marked temporary directory, which the next run on the same target
// removes; a crash after it leaves the complete target.
type Stage struct {
	target string
	dir    string
	force  bool
	kind   Kind
	fs     fsx.FS
	lock   *os.File
	lockP  string
	done   bool
	// Removed lists stale temporary directories of dead runs that Begin
	// cleaned up, for the caller to report.
	Removed []string
	// Leftover lists temporary directories Begin found but would not remove
	// (no marker, or a complete snapshot from an interrupted publish).
	Leftover []string
}

// Begin checks the target, takes the lock, removes stale temporary
// directories of dead runs, and creates a fresh marked temporary directory.
// A target that exists and is not an empty directory is ErrTargetExists
// unless force is set; force replaces only a snapshot (SnapshotKind).
func Begin(target string, force bool) (*Stage, error) {
	return BeginFS(target, force, nil)
}

// BeginFS is Begin with the temporary directory's file operations going
// through fs (nil is the real filesystem); tests inject faults with it.
func BeginFS(target string, force bool, fs fsx.FS) (*Stage, error) {
	return BeginKind(target, force, fs, SnapshotKind)
}

// BeginKind is BeginFS for an output of another kind: force replaces a
// non-empty directory only when kind recognizes it.
func BeginKind(target string, force bool, fs fsx.FS, kind Kind) (*Stage, error) {
	abs, err := filepath.Abs(target)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", target, err)
	}
	parent, base := filepath.Dir(abs), filepath.Base(abs)
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: target %s: parent directory %s does not exist; create it first", snapshotfmt.ErrInvalidArgument, target, parent)
	}
	if err := checkTarget(abs, force, kind); err != nil {
		return nil, err
	}
	if err := checkNotMountPoint(abs); err != nil { // mountpoint.go
		return nil, err
	}
	s := &Stage{target: abs, force: force, kind: kind, fs: fsx.Or(fs), lockP: filepath.Join(parent, "."+base+".rebucket.lock"),
		Removed: []string{}, Leftover: []string{}}
	if err := s.takeLock(); err != nil {
		return nil, err
	}
	s.cleanStale(parent, base)
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	runID := hex.EncodeToString(id)
	s.dir = filepath.Join(parent, "."+base+tmpInfix+runID)
	if err := s.fs.Mkdir(s.dir, fsx.DirPerm); err != nil {
		s.unlock()
		return nil, fmt.Errorf("create temporary directory %s: %w", s.dir, err)
	}
	mk, _ := json.Marshal(Marker{RunID: runID, PID: os.Getpid(), BootID: fsx.BootID(), Started: time.Now().UTC(), Target: abs})
	if err := writeFileSync(s.fs, filepath.Join(s.dir, MarkerName), mk); err != nil {
		s.Abort()
		return nil, err
	}
	return s, nil
}

// Dir is the temporary directory to build the output in.
func (s *Stage) Dir() string { return s.dir }

// Target is the absolute target path.
func (s *Stage) Target() string { return s.target }

func checkTarget(abs string, force bool, kind Kind) error {
	st, err := os.Lstat(abs)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("target %s: %w", abs, err)
	}
	if !st.IsDir() {
		what := describeMode(st.Mode())
		if st.Mode().IsRegular() {
			what = "a file"
		}
		if force {
			return fmt.Errorf("%w: target %s is %s, not a directory; --force replaces only a %s rebucket wrote", snapshotfmt.ErrRefused, abs, what, kind.Name)
		}
		return fmt.Errorf("%w: %s (%s); choose another --out", ErrTargetExists, abs, what)
	}
	ents, err := os.ReadDir(abs)
	if err != nil {
		return fmt.Errorf("target %s: %w", abs, err)
	}
	if len(ents) > 0 && !force {
		return fmt.Errorf("%w: %s; choose another --out, or pass --force to replace it once the new one is complete", ErrTargetExists, abs)
	}
	if len(ents) > 0 && kind.Check != nil {
		if err := kind.Check(abs); err != nil {
			return fmt.Errorf("%w: %s is not a %s (%v); --force replaces only a %s rebucket wrote: remove it yourself or choose another --out",
				snapshotfmt.ErrRefused, abs, kind.Name, err, kind.Name)
		}
	}
	return nil
}

func (s *Stage) takeLock() error {
	for {
		f, err := os.OpenFile(s.lockP, os.O_CREATE|os.O_RDWR, fsx.FilePerm)
		if err != nil {
			return fmt.Errorf("lock %s: %w", s.lockP, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return fmt.Errorf("%w: %s is held; wait for that run to finish", ErrLocked, s.lockP)
			}
			return fmt.Errorf("lock %s: %w", s.lockP, err)
		}
		// The holder before us may have removed the file after we opened it;
		// then our lock is on an orphan inode and we must retry.
		var a, b unix.Stat_t
		if unix.Fstat(int(f.Fd()), &a) == nil && unix.Stat(s.lockP, &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			s.lock = f
			return nil
		}
		f.Close()
	}
}

func (s *Stage) unlock() {
	if s.lock != nil {
		os.Remove(s.lockP)
		s.lock.Close()
		s.lock = nil
	}
}

// cleanStale removes temporary directories of this target whose marker
// names a dead process. We hold the lock, so no live run can own one; the
// PID check guards against a marker copied from elsewhere.
func (s *Stage) cleanStale(parent, base string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	prefix := "." + base + tmpInfix
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(parent, e.Name())
		// Never blocks on a FIFO planted as a marker (issue 14, item 6).
		data, err := fsx.ReadRegular(filepath.Join(p, MarkerName), 1<<20)
		var m Marker
		if err != nil || json.Unmarshal(data, &m) != nil {
			// A run killed between creating its directory and writing
			// its marker leaves it empty (or with a torn marker): nothing
			// to lose, and we hold the lock, so its run is gone.
			if !emptyButMarker(p) {
				s.Leftover = append(s.Leftover, p)
				continue
			}
		} else if processAlive(m.PID) && (m.BootID == "" || m.BootID == fsx.BootID()) {
			// (A marker of another boot is a dead run's, whatever its
			// pid now names.)
			s.Leftover = append(s.Leftover, p)
			continue
		}
		if os.RemoveAll(p) == nil {
			s.Removed = append(s.Removed, p)
		} else {
			s.Leftover = append(s.Leftover, p)
		}
	}
}

// emptyButMarker reports whether dir holds nothing but (perhaps) a marker.
func emptyButMarker(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name() != MarkerName {
			return false
		}
	}
	return true
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Publish makes the temporary directory the target. With force and an
// existing target, the two are exchanged atomically and only then is the old
// one removed.
func (s *Stage) Publish() error {
	if s.done {
		return errors.New("stage already finished")
	}
	// Everything under the directory becomes durable before the rename
	// makes it visible, whoever wrote it (fsync of a file already synced
	// is nearly free). The marker stays until the rename: a temporary
	// directory of ours always names its run, so a crash never leaves an
	// unmarked one that no later run may remove.
	if err := syncTree(s.fs, s.dir); err != nil {
		return err
	}
	parent := filepath.Dir(s.target)
	// Re-check: the target may have appeared while we worked.
	if err := checkTarget(s.target, s.force, s.kind); err != nil {
		return err
	}
	var old string
	if st, err := os.Lstat(s.target); err == nil && st.IsDir() {
		ents, _ := os.ReadDir(s.target)
		if len(ents) > 0 {
			if err := fsx.Exchange(s.fs, s.dir, s.target); err != nil {
				if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
					// A real failure (no space, I/O): the old target is
					// untouched.
					return fmt.Errorf("publish %s: %w", s.target, err)
				}
				// No exchange on this filesystem: move the old one aside first.
				old = s.dir + ".old"
				if err := s.fs.Rename(s.target, old); err != nil {
					return fmt.Errorf("move old target aside: %w", err)
				}
				if err := s.fs.Rename(s.dir, s.target); err != nil {
					if rerr := s.fs.Rename(old, s.target); rerr != nil {
						s.done = true // keep both: the old one is at old
						return fmt.Errorf("publish %s: %w; restoring the old target failed too (%v): it is at %s", s.target, err, rerr, old)
					}
					return fmt.Errorf("publish %s: %w", s.target, err)
				}
			} else {
				old = s.dir
			}
		}
	}
	if old == "" {
		// rename(2) itself (fsx.OS), not os.Rename: the target may be an
		// empty directory, which rename(2) replaces atomically but
		// os.Rename refuses.
		if err := s.fs.Rename(s.dir, s.target); err != nil {
			return fmt.Errorf("publish %s: %w", s.target, err)
		}
	}
	if err := syncDir(s.fs, parent); err != nil {
		return err
	}
	s.done = true
	// Published. The marker goes last, from the target; a crash just
	// before leaves it inert inside the complete target (no run removes a
	// target by its marker, only temporary directories).
	if err := s.fs.Remove(filepath.Join(s.target, MarkerName)); err == nil {
		_ = syncDir(s.fs, s.target)
	}
	if old != "" {
		if err := s.fs.RemoveAll(old); err != nil {
			s.unlock()
			return fmt.Errorf("new target published; removing the old one at %s failed: %w", old, err)
		}
	}
	s.unlock()
	return nil
}

// Abort removes the temporary directory and releases the lock. It is safe
// to call after Publish (it does nothing then).
func (s *Stage) Abort() {
	if !s.done {
		s.done = true
		if s.dir != "" {
			s.fs.RemoveAll(s.dir)
		}
	}
	s.unlock()
}

func writeFileSync(fs fsx.FS, p string, data []byte) error {
	f, err := fsx.Create(fs, p, fsx.FilePerm)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", p, err)
	}
	return nil
}

func syncDir(fs fsx.FS, p string) error {
	if err := fsx.SyncDir(fs, p); err != nil {
		return fmt.Errorf("fsync directory %s: %w", p, err)
	}
	return nil
}

// syncTree fsyncs every regular file and directory under root, directories
// after their entries.
func syncTree(fs fsx.FS, root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, p)
		case d.Type().IsRegular():
			f, err := fsx.Or(fs).Open(p)
			if err != nil {
				return err
			}
			err = f.Sync()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("fsync %s: %w", p, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncDir(fs, dirs[i]); err != nil {
			return err
		}
	}
	return nil
}
