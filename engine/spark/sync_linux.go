//go:build linux

package spark

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncTree makes every file written under dir durable: one syncfs(2) of
// its file system instead of an fsync per file (a checkpoint copy has
// many small files), then the directories by the caller.
func syncTree(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	return nil
}
