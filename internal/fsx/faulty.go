package fsx

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Op names an operation Faulty can fail.
type Op string

const (
	OpCreate Op = "create" // OpenFile with O_CREATE
	OpOpen   Op = "open"
	OpWrite  Op = "write"
	OpRead   Op = "read"
	OpSync   Op = "fsync"
	OpRename Op = "rename"
	OpMkdir  Op = "mkdir"
	OpLink   Op = "link"
)

// Fault fails one kind of operation on matching paths.
type Fault struct {
	Op Op
	// Path must be a substring of the file's path ("" matches all); a
	// trailing "$" makes it a suffix ("/data$": the directory itself).
	Path string
	// Err is the error returned, wrapped in an *os.PathError naming the
	// operation and the file (syscall.ENOSPC, syscall.EIO, ...).
	Err syscall.Errno
	// After lets this many matching operations succeed first.
	After int
}

// Faulty is an FS over another that fails the operations its Fault
// describes. Hits counts the failures it injected.
type Faulty struct {
	Base  FS
	Fault Fault
	seen  atomic.Int64
	Hits  atomic.Int64
	mu    sync.Mutex
	// Paths records the paths of the failures.
	Paths []string
}

func (f *Faulty) fail(op Op, path string) error {
	ft := f.Fault
	if ft.Op != op {
		return nil
	}
	if suffix, ok := strings.CutSuffix(ft.Path, "$"); ok {
		if !strings.HasSuffix(path, suffix) {
			return nil
		}
	} else if !strings.Contains(path, ft.Path) {
		return nil
	}
	if f.seen.Add(1) <= int64(ft.After) {
		return nil
	}
	f.Hits.Add(1)
	f.mu.Lock()
	f.Paths = append(f.Paths, path)
	f.mu.Unlock()
	return &os.PathError{Op: string(op), Path: path, Err: ft.Err}
}

func (f *Faulty) base() FS { return Or(f.Base) }

func (f *Faulty) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag&os.O_CREATE != 0 {
		if err := f.fail(OpCreate, name); err != nil {
			return nil, err
		}
	} else if err := f.fail(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.base().OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f}, nil
}

func (f *Faulty) Open(name string) (File, error) {
	if err := f.fail(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.base().Open(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f}, nil
}

func (f *Faulty) Mkdir(name string, perm os.FileMode) error {
	if err := f.fail(OpMkdir, name); err != nil {
		return err
	}
	return f.base().Mkdir(name, perm)
}

func (f *Faulty) MkdirTemp(dir, pattern string) (string, error) {
	if err := f.fail(OpMkdir, dir+"/"+pattern); err != nil {
		return "", err
	}
	return f.base().MkdirTemp(dir, pattern)
}

func (f *Faulty) Rename(oldpath, newpath string) error {
	if err := f.fail(OpRename, newpath); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: f.Fault.Err}
	}
	return f.base().Rename(oldpath, newpath)
}

func (f *Faulty) Remove(name string) error    { return f.base().Remove(name) }
func (f *Faulty) RemoveAll(name string) error { return f.base().RemoveAll(name) }

func (f *Faulty) Link(oldname, newname string) error {
	if err := f.fail(OpLink, newname); err != nil {
		return err
	}
	return f.base().Link(oldname, newname)
}

type faultyFile struct {
	File
	fs *Faulty
}

func (ff *faultyFile) Write(p []byte) (int, error) {
	if err := ff.fs.fail(OpWrite, ff.Name()); err != nil {
		return 0, err
	}
	return ff.File.Write(p)
}

func (ff *faultyFile) Read(p []byte) (int, error) {
	if err := ff.fs.fail(OpRead, ff.Name()); err != nil {
		return 0, err
	}
	return ff.File.Read(p)
}

func (ff *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := ff.fs.fail(OpRead, ff.Name()); err != nil {
		return 0, err
	}
	return ff.File.ReadAt(p, off)
}

func (ff *faultyFile) Sync() error {
	if err := ff.fs.fail(OpSync, ff.Name()); err != nil {
		return err
	}
	return ff.File.Sync()
}

// Exchange fails like Rename, else exchanges on the base filesystem.
func (f *Faulty) Exchange(a, b string) error {
	if err := f.fail(OpRename, b); err != nil {
		return &os.LinkError{Op: "exchange", Old: a, New: b, Err: f.Fault.Err}
	}
	return Exchange(f.base(), a, b)
}

// Wrap makes reads, writes and fsyncs of an already open file go through
// the faults (for files opened elsewhere, such as a snapshot's listed files).
func (f *Faulty) Wrap(file File) File { return &faultyFile{File: file, fs: f} }
