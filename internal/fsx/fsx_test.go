package fsx

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	// A process that has exited: its pid is dead (unless reused at once).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	const prefix = ".x-"
	names := map[string]bool{ // name -> removed
		prefix + strconv.Itoa(dead) + "-aa":        true,
		prefix + strconv.Itoa(os.Getpid()) + "-bb": false, // ours: alive
		prefix + "notapid-cc":                      false,
		prefix + "1-dd":                            false, // init: alive
		"other-" + strconv.Itoa(dead) + "-ee":      false, // another prefix
	}
	for n := range names {
		if err := os.Mkdir(filepath.Join(dir, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removed := RemoveStale(nil, dir, prefix)
	if len(removed) != 1 || filepath.Base(removed[0]) != prefix+strconv.Itoa(dead)+"-aa" {
		t.Errorf("removed %v", removed)
	}
	for n, gone := range names {
		_, err := os.Stat(filepath.Join(dir, n))
		if gone != errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: removed %v, want %v", n, !gone, gone)
		}
	}
	if name := TempName(prefix); len(name) <= len(prefix) || name[:len(prefix)] != prefix {
		t.Errorf("TempName %q", name)
	}
}

func TestFaultyMatching(t *testing.T) {
	dir := t.TempDir()
	ffs := &Faulty{Fault: Fault{Op: OpWrite, Path: "/b$", Err: syscall.ENOSPC, After: 1}}
	for _, n := range []string{"a", "b", "bb"} {
		f, err := Create(ffs, filepath.Join(dir, n), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		_, err1 := f.Write([]byte("x"))
		_, err2 := f.Write([]byte("y"))
		f.Close()
		switch n {
		case "b": // the first matching write passes (After 1), the second fails
			var pe *os.PathError
			if err1 != nil || !errors.As(err2, &pe) || pe.Op != "write" || !errors.Is(err2, syscall.ENOSPC) {
				t.Errorf("%s: %v, %v", n, err1, err2)
			}
		default:
			if err1 != nil || err2 != nil {
				t.Errorf("%s: %v, %v", n, err1, err2)
			}
		}
	}
	if ffs.Hits.Load() != 1 || len(ffs.Paths) != 1 {
		t.Errorf("hits %d, paths %v", ffs.Hits.Load(), ffs.Paths)
	}
	// Rename is rename(2): it replaces an empty directory.
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{src, dst} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := OS.Rename(src, dst); err != nil {
		t.Errorf("rename onto an empty directory: %v", err)
	}
}
