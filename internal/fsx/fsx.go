// Package fsx is the thin file-operations interface that the writer, the
// spill (extsort) and the loader go through, so a test can fail any one
// operation (ENOSPC on write, fsync or rename; EIO on read) and check what
// the caller does with it. OS is the real filesystem; Faulty wraps one.
//
// It also names temporary entries after the process that made them
// (TempName) and locks run directories for their run's life (MkdirRun), so
// a later run can tell the leftovers of a dead run (RemoveStale) from
// those of a live one, even in another PID namespace.
package fsx

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Permissions of everything the tools write: no access for other users
// (a snapshot holds a job's state); the owner's group may read, so a job
// running under a shared group can load it. The process umask may remove
// more.
const (
	DirPerm  os.FileMode = 0o750
	FilePerm os.FileMode = 0o640
)

// File is an open file.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	Name() string
	Sync() error
	Stat() (os.FileInfo, error)
	Fd() uintptr
}

// FS is the set of operations the writing paths use. Errors are those of
// package os (a *PathError naming the operation and the file).
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Open(name string) (File, error)
	Mkdir(name string, perm os.FileMode) error
	MkdirTemp(dir, pattern string) (string, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	RemoveAll(name string) error
	Link(oldname, newname string) error
}

// OS is the real filesystem.
var OS FS = osFS{}

// Or returns fs, or OS when fs is nil (for zero-value options).
func Or(fs FS) FS {
	if fs == nil {
		return OS
	}
	return fs
}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Mkdir(name string, perm os.FileMode) error     { return os.Mkdir(name, perm) }
func (osFS) MkdirTemp(dir, pattern string) (string, error) { return os.MkdirTemp(dir, pattern) }
func (osFS) Remove(name string) error                      { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                   { return os.RemoveAll(name) }
func (osFS) Link(oldname, newname string) error            { return os.Link(oldname, newname) }

// Rename is rename(2) itself, not os.Rename: the target may be an empty
// directory, which rename(2) replaces atomically but os.Rename refuses.
func (osFS) Rename(oldpath, newpath string) error {
	if err := unix.Renameat(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

// Exchange swaps two paths atomically (renameat2 RENAME_EXCHANGE); it
// fails on filesystems without it.
func Exchange(fs FS, a, b string) error {
	if x, ok := fs.(interface{ Exchange(a, b string) error }); ok {
		return x.Exchange(a, b)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		return &os.LinkError{Op: "exchange", Old: a, New: b, Err: err}
	}
	return nil
}

// Create creates name exclusively for writing.
func Create(fs FS, name string, perm os.FileMode) (File, error) {
	return Or(fs).OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
}

// SyncDir fsyncs a directory, so the entries created or renamed in it are
// durable.
func SyncDir(fs FS, dir string) error {
	d, err := Or(fs).Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: unwrapPath(err)}
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// TempName returns prefix + "<pid>-<random>": the name of a temporary
// entry that records the process making it, atomically with its creation.
func TempName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// ProcessAlive reports whether pid names a running process (this one
// included).
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
