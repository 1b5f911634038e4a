package reader

import (
	"errors"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rebucket/rebucket/internal/fsx"
)

// storeFS is the filesystem of the worker stores: Pebble's own (vfs.Default
// or a wrapper of it) creating its directories and files with the tools'
// permissions (fsx.DirPerm, fsx.FilePerm, before the umask) instead of
// Pebble's 0755 and 0666. A file is created empty with our permission
// first and only then opened through the wrapped filesystem, so it never
// exists with wider ones. Files Pebble ingests by hard link keep their own
// inode's permissions (a clipped or copied table is ours; a linked one is
// the snapshot's file).
type storeFS struct{ vfs.FS }

func (fs storeFS) Unwrap() vfs.FS { return fs.FS }

func (fs storeFS) MkdirAll(dir string, perm os.FileMode) error {
	return fs.FS.MkdirAll(dir, perm&fsx.DirPerm)
}

// Create replaces any file at name by a new one, as vfs.Default's does.
func (fs storeFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := createEmpty(name); err != nil {
		return nil, err
	}
	return fs.FS.OpenReadWrite(name, category)
}

func (fs storeFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := createEmpty(name); err != nil {
		return nil, err
	}
	return fs.FS.OpenReadWrite(name, category, opts...)
}

func (fs storeFS) Lock(name string) (io.Closer, error) {
	if err := createEmpty(name); err != nil {
		return nil, err
	}
	return fs.FS.Lock(name)
}

// createEmpty creates name with fsx.FilePerm unless it exists.
func createEmpty(name string) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fsx.FilePerm)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// storeVFS is the filesystem StoreOptions gives Pebble.
var storeVFS vfs.FS = storeFS{vfs.Default}
