package fsx

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// A process id alone does not say whether a temporary directory's run is
// alive: a run in another PID namespace (a second container sharing --tmp)
// has ids that mean nothing here, and ids are reused. So every run
// directory holds a lock file that its run keeps locked (flock) for as long
// as it lives; the kernel drops the lock when the process dies, however it
// dies, and the lock is seen from every PID namespace on the machine. A
// directory is stale only when its lock can be taken.

// LockName is the file inside a run directory that its run holds locked.
// It records the run (RunInfo) for people reading a leftover.
const LockName = ".rebucket-run.lock"

// StaleGrace is how long an entry with no lock to go by (a file, or a
// directory left by an older version or killed before its lock existed)
// must have been untouched, besides its process id being dead here, before
// RemoveStale takes it for a dead run's.
var StaleGrace = 10 * time.Minute

// RunInfo is what a run directory's lock file records.
type RunInfo struct {
	PID     int       `json:"pid"`
	BootID  string    `json:"boot_id,omitempty"`
	Started time.Time `json:"started"`
}

// RunDir is a temporary directory owned by this run for as long as it is
// open: created by MkdirRun, ended by Remove.
type RunDir struct {
	// Path is the directory.
	Path string
	lock *os.File
	fs   FS
}

// MkdirRun creates a directory named TempName(prefix) in dir, with perm,
// and locks it for this run's life (until Remove).
func MkdirRun(fs FS, dir, prefix string, perm os.FileMode) (*RunDir, error) {
	fs = Or(fs)
	for attempt := 0; ; attempt++ {
		p := filepath.Join(dir, TempName(prefix))
		if err := fs.Mkdir(p, perm); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				// the usual cause: --out names a directory whose parent is missing
				return nil, fmt.Errorf("%w: %s, where the output goes, does not exist (create it first)", snapshotfmt.ErrInvalidArgument, dir)
			}
			return nil, err
		}
		lock, err := lockRunDir(p)
		if err == nil {
			return &RunDir{Path: p, lock: lock, fs: fs}, nil
		}
		// Another run's RemoveStale may take our directory for a dead
		// run's in the instant before its lock exists (it is empty, and
		// our pid means nothing to a run in another PID namespace): then
		// start again under a new name.
		fs.RemoveAll(p)
		if !errors.Is(err, errVanished) || attempt >= 3 {
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
	}
}

var errVanished = errors.New("run directory removed while it was being created")

func lockRunDir(dir string) (*os.File, error) {
	p := filepath.Join(dir, LockName)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDWR|unix.O_NOFOLLOW, FilePerm)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errVanished
	}
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			// A RemoveStale holds it: it is removing the directory.
			return nil, errVanished
		}
		return nil, err
	}
	// Locked, but the lock protects the directory only if the file is
	// still in it (a RemoveStale may have removed both just before).
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat(p, &b) != nil || a.Ino != b.Ino || a.Dev != b.Dev {
		f.Close()
		return nil, errVanished
	}
	info, _ := json.Marshal(RunInfo{PID: os.Getpid(), BootID: BootID(), Started: time.Now().UTC()})
	_, _ = f.Write(append(info, '\n'))
	return f, nil
}

// Remove removes the directory and everything in it, then releases the
// lock. Safe to call twice and on nil.
func (d *RunDir) Remove() error {
	if d == nil || d.lock == nil {
		return nil
	}
	err := d.fs.RemoveAll(d.Path)
	d.lock.Close()
	d.lock = nil
	return err
}

var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// BootID is this machine's boot id ("" where the system has none): a run
// recorded under another boot id is dead, whatever its process id.
func BootID() string { return bootID() }

// RemoveStale removes the entries of dir named by TempName(prefix) whose
// run is gone, and returns their paths:
//
//   - a directory with a lock file is removed when its lock can be taken
//     (no live run holds it, in any PID namespace); it is removed while
//     held, so two cleaners never race;
//   - an empty directory without one is removed when its process id is
//     dead here (a run killed before its lock existed; a live one in
//     another namespace starts again, see MkdirRun);
//   - anything else (a file, a directory of an older version) only when
//     its process id is dead here and it has been untouched for
//     StaleGrace.
//
// Entries of live runs, symbolic links and names that do not parse are
// left alone.
func RemoveStale(fs FS, dir, prefix string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if removeIfStale(Or(fs), p, pid) {
			removed = append(removed, p)
		}
	}
	return removed
}

func removeIfStale(fs FS, p string, pid int) bool {
	st, err := os.Lstat(p)
	if err != nil || st.Mode()&os.ModeSymlink != 0 {
		return false
	}
	if st.IsDir() {
		f, err := os.OpenFile(filepath.Join(p, LockName), os.O_RDWR|unix.O_NOFOLLOW, 0)
		if err == nil {
			defer f.Close()
			if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
				return false // held: a live run, whatever its pid says
			}
			return fs.RemoveAll(p) == nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return false
		}
		if ProcessAlive(pid) {
			return false
		}
		if ents, err := os.ReadDir(p); err == nil && len(ents) == 0 {
			return fs.Remove(p) == nil
		}
	} else if ProcessAlive(pid) {
		return false
	}
	if time.Since(st.ModTime()) < StaleGrace {
		return false
	}
	return fs.RemoveAll(p) == nil
}
