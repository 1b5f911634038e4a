package writer

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// checkNotMountPoint refuses a target directory that is a mount point.
// Publishing renames the finished output onto the target, and the kernel
// refuses to rename onto a mount point (EBUSY): an empty mount point
// passed every check and failed only at the end, after all the work.
func checkNotMountPoint(abs string) error {
	if !isMountPoint(abs) {
		return nil
	}
	return fmt.Errorf("%w: target %s is a mount point: the finished output is published by renaming it onto the target, which the kernel refuses for a mount point; write into a new directory inside it (for example --out %s)",
		snapshotfmt.ErrRefused, abs, filepath.Join(abs, "snapshot"))
}

// isMountPoint tells whether dir (an existing directory, not followed if
// a link) is the root of a mount: statx's STATX_ATTR_MOUNT_ROOT where the
// kernel reports it (Linux 5.8), else a device unlike its parent's (which
// misses a bind mount of the same filesystem).
func isMountPoint(dir string) bool {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err == nil &&
		stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 && stx.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() {
		return false
	}
	pst, err := os.Stat(filepath.Dir(dir))
	if err != nil {
		return false
	}
	a, ok1 := st.Sys().(*syscall.Stat_t)
	b, ok2 := pst.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && a.Dev != b.Dev
}
