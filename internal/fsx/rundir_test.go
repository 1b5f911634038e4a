package fsx

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// deadPID returns the id of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestHelperHoldLock is not a test: run with FSX_HOLD_LOCK=FILE it locks
// FILE, says so, and holds it until its stdin closes (a run of another
// process, for the tests below).
func TestHelperHoldLock(t *testing.T) {
	p := os.Getenv("FSX_HOLD_LOCK")
	if p == "" {
		t.Skip("helper process only")
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	io.Copy(io.Discard, os.Stdin)
}

// A live run in another PID namespace: its directory's name carries a pid
// that is dead here, but it holds its lock. RemoveStale must keep it, and
// remove it once that process is gone.
func TestRemoveStaleKeepsLockedRunOfAnotherNamespace(t *testing.T) {
	dir := t.TempDir()
	const prefix = ".rebucket-spill-"
	p := filepath.Join(dir, prefix+strconv.Itoa(deadPID(t))+"-abcdef")
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(p, LockName), nil, 0o600)
	os.WriteFile(filepath.Join(p, "run-000000"), []byte("spilled entries"), 0o600)

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), "FSX_HOLD_LOCK="+filepath.Join(p, LockName))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	if removed := RemoveStale(nil, dir, prefix); len(removed) != 0 {
		t.Fatalf("removed the directory of a live run: %v", removed)
	}
	if _, err := os.Stat(filepath.Join(p, "run-000000")); err != nil {
		t.Fatalf("a live run's spill file is gone: %v", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if removed := RemoveStale(nil, dir, prefix); len(removed) != 1 {
		t.Fatalf("the run ended, its directory stays: removed %v", removed)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("still there: %v", err)
	}
}

// In one process too: a RunDir's lock is held per open file, so another
// cleaner (another goroutine's sorter) sees it live.
func TestMkdirRunHoldsItsDirectory(t *testing.T) {
	dir := t.TempDir()
	const prefix = ".x-"
	d, err := MkdirRun(nil, dir, prefix, 0o700)
	if err != nil {
		t.Fatal(err)
	}
	// Renamed under a pid that is dead here, as another namespace's
	// would look.
	alias := filepath.Join(dir, prefix+strconv.Itoa(deadPID(t))+"-ff")
	if err := os.Rename(d.Path, alias); err != nil {
		t.Fatal(err)
	}
	d.Path = alias
	if removed := RemoveStale(nil, dir, prefix); len(removed) != 0 {
		t.Fatalf("removed a held directory: %v", removed)
	}
	var info RunInfo
	if data, err := os.ReadFile(filepath.Join(alias, LockName)); err != nil || json.Unmarshal(data, &info) != nil || info.PID != os.Getpid() || info.BootID != BootID() {
		t.Fatalf("lock file records %s (%v)", data, err)
	}
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(alias); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Remove left %s: %v", alias, err)
	}
	if err := d.Remove(); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}

// A run killed (SIGKILL) leaves its directory with an unheld lock: the
// next RemoveStale removes it at once.
func TestRemoveStaleKilledRun(t *testing.T) {
	dir := t.TempDir()
	const prefix = ".x-"
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMkdirRun$")
	cmd.Env = append(os.Environ(), "FSX_MKDIR_RUN="+dir)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	if removed := RemoveStale(nil, dir, prefix); len(removed) != 0 {
		t.Fatalf("removed a live run's directory: %v", removed)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	removed := RemoveStale(nil, dir, prefix)
	if len(removed) != 1 || removed[0]+"\n" != line {
		t.Fatalf("removed %v, want %s", removed, line)
	}
}

// TestHelperMkdirRun is not a test: with FSX_MKDIR_RUN=DIR it makes a run
// directory there, prints its path and waits to be killed.
func TestHelperMkdirRun(t *testing.T) {
	dir := os.Getenv("FSX_MKDIR_RUN")
	if dir == "" {
		t.Skip("helper process only")
	}
	d, err := MkdirRun(nil, dir, ".x-", 0o700)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString(d.Path + "\n")
	time.Sleep(time.Minute)
}

// Entries with no lock to go by: an empty directory of a dead pid goes at
// once; a file or a non-empty directory (an older version's) only once
// untouched for StaleGrace; anything of a live pid stays.
func TestRemoveStaleWithoutLock(t *testing.T) {
	dir := t.TempDir()
	dead := strconv.Itoa(deadPID(t))
	const prefix = ".x-"
	old := time.Now().Add(-2 * StaleGrace)
	type entry struct {
		file, nonEmpty, old bool
		pid                 string
		gone                bool
	}
	entries := map[string]entry{
		"empty-dead":    {pid: dead, gone: true},
		"empty-live":    {pid: strconv.Itoa(os.Getpid())},
		"file-dead-new": {file: true, pid: dead},
		"file-dead-old": {file: true, pid: dead, old: true, gone: true},
		"file-live-old": {file: true, pid: strconv.Itoa(os.Getpid()), old: true},
		"full-dead-new": {nonEmpty: true, pid: dead},
		"full-dead-old": {nonEmpty: true, pid: dead, old: true, gone: true},
		"full-init-old": {nonEmpty: true, pid: "1", old: true},
	}
	for name, e := range entries {
		p := filepath.Join(dir, prefix+e.pid+"-"+name)
		if e.file {
			os.WriteFile(p, []byte("x"), 0o600)
		} else {
			os.Mkdir(p, 0o700)
			if e.nonEmpty {
				os.WriteFile(filepath.Join(p, "run"), []byte("x"), 0o600)
			}
		}
		if e.old {
			os.Chtimes(p, old, old)
		}
	}
	if err := os.Symlink(dir, filepath.Join(dir, prefix+dead+"-link")); err != nil {
		t.Fatal(err)
	}
	RemoveStale(nil, dir, prefix)
	for name, e := range entries {
		_, err := os.Lstat(filepath.Join(dir, prefix+e.pid+"-"+name))
		if e.gone != errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: gone %v, want %v", name, !e.gone, e.gone)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, prefix+dead+"-link")); err != nil {
		t.Errorf("a symbolic link was removed: %v", err)
	}
}

func TestBootID(t *testing.T) {
	if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err == nil && len(BootID()) != 36 {
		t.Fatalf("boot id %q", BootID())
	}
}

// A run directory in a directory that does not exist (--out under a
// missing parent) is an invalid argument naming that directory.
func TestMkdirRunMissingParent(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such")
	_, err := MkdirRun(nil, missing, ".x-", 0o700)
	if !errors.Is(err, snapshotfmt.ErrInvalidArgument) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("%v", err)
	}
}
