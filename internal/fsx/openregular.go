package fsx

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Every input the tools read is a regular file. open(2) of a FIFO blocks
// until a writer appears (past SIGTERM and SIGINT: the signal is handled in
// Go, the blocked thread never returns), and opening a device may have side
// effects, so inputs are opened with O_NONBLOCK (a FIFO then opens at once),
// checked with fstat, and refused unless regular; O_NONBLOCK is cleared
// before the file is used.

// OpenRegular opens the regular file at path for reading, following
// symbolic links (for paths a user named). Anything else (a FIFO, a device,
// a socket, a directory) is refused without blocking, with an error
// wrapping snapshotfmt.ErrInvalidArgument that names the path and its type.
func OpenRegular(path string) (*os.File, error) {
	return openRegular(unix.AT_FDCWD, path, path, 0, snapshotfmt.ErrInvalidArgument)
}

// OpenRegularNoFollow is OpenRegular refusing a symbolic link as the last
// component (for paths inside a snapshot or dataset that must be its own);
// that refusal, and a file that is not regular, wrap snapshotfmt.ErrCorrupt.
func OpenRegularNoFollow(path string) (*os.File, error) {
	return openRegular(unix.AT_FDCWD, path, path, unix.O_NOFOLLOW, snapshotfmt.ErrCorrupt)
}

// OpenRegularAt opens name relative to the directory dirfd without
// following a symbolic link at name; display is the path errors name.
// Errors are as OpenRegularNoFollow's.
func OpenRegularAt(dirfd int, name, display string) (*os.File, error) {
	return openRegular(dirfd, name, display, unix.O_NOFOLLOW, snapshotfmt.ErrCorrupt)
}

// ReadRegular reads the whole regular file at path (following links),
// refusing one larger than limit bytes by its size before reading it.
func ReadRegular(path string, limit int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d-byte bound", snapshotfmt.ErrTooLarge, path, st.Size(), limit)
	}
	// Read one byte past the bound, in case the file grew since fstat.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: unwrapPath(err)}
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s is over the %d-byte bound", snapshotfmt.ErrTooLarge, path, limit)
	}
	return data, nil
}

func openRegular(dirfd int, name, display string, extra int, kind error) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC|extra, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		var st unix.Stat_t
		switch {
		case extra&unix.O_NOFOLLOW != 0 && errors.Is(err, unix.ELOOP):
			if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return nil, fmt.Errorf("%w: %s is a symbolic link; it must be a regular file of its own", kind, display)
			}
		case errors.Is(err, unix.ENXIO):
			// A socket (or a device without its driver) cannot be opened.
			if unix.Fstatat(dirfd, name, &st, 0) == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
				return nil, fmt.Errorf("%w: %s is %s, not a regular file", kind, display, typeName(st.Mode))
			}
		}
		return nil, &os.PathError{Op: "open", Path: display, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: display, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s is %s, not a regular file", kind, display, typeName(st.Mode))
	}
	// Back to blocking reads (O_NONBLOCK means nothing for a regular file
	// on most filesystems, but a network one may honour it).
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags&^unix.O_NONBLOCK)
	}
	if err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: display, Err: err}
	}
	return os.NewFile(uintptr(fd), display), nil
}

// typeName names a file type for a message.
func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO (named pipe)"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return "of an unknown type"
}

// TypeName names the type of a file mode for a message ("a FIFO (named
// pipe)", "a directory", ...).
func TypeName(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t == 0:
		return "a regular file"
	}
	return "of an unknown type"
}
