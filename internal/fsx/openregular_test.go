package fsx

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// within fails the test if fn does not return within d (a blocking open of
// a FIFO never would).
func returnsWithin(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("did not return within %v (blocked in open?)", d)
	}
}

func TestOpenRegularRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	devLink := filepath.Join(dir, "null")
	if err := os.Symlink("/dev/null", devLink); err != nil {
		t.Fatal(err)
	}
	fifoLink := filepath.Join(dir, "fifolink")
	if err := os.Symlink(fifo, fifoLink); err != nil {
		t.Fatal(err)
	}
	regLink := filepath.Join(dir, "reglink")
	if err := os.Symlink(reg, regLink); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	if l, err := net.Listen("unix", sock); err == nil {
		defer l.Close()
	} else {
		sock = ""
	}
	for _, tc := range []struct {
		name, path, want string
		open             func(string) (*os.File, error)
		kind             error
	}{
		{"fifo", fifo, "FIFO", OpenRegular, snapshotfmt.ErrInvalidArgument},
		{"fifo via link", fifoLink, "FIFO", OpenRegular, snapshotfmt.ErrInvalidArgument},
		{"device via link", devLink, "character device", OpenRegular, snapshotfmt.ErrInvalidArgument},
		{"directory", dir, "directory", OpenRegular, snapshotfmt.ErrInvalidArgument},
		{"socket", sock, "", OpenRegular, snapshotfmt.ErrInvalidArgument},
		{"fifo nofollow", fifo, "FIFO", OpenRegularNoFollow, snapshotfmt.ErrCorrupt},
		{"link nofollow", regLink, "symbolic link", OpenRegularNoFollow, snapshotfmt.ErrCorrupt},
		{"device link nofollow", devLink, "symbolic link", OpenRegularNoFollow, snapshotfmt.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.path == "" {
				t.Skip("no unix socket here")
			}
			returnsWithin(t, 5*time.Second, func() {
				f, err := tc.open(tc.path)
				if err == nil {
					f.Close()
					t.Errorf("%s opened", tc.path)
					return
				}
				if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q: want %v naming %s and %q", err, tc.kind, tc.path, tc.want)
				}
			})
		})
	}
	for _, p := range []string{reg, regLink} {
		f, err := OpenRegular(p)
		if err != nil {
			t.Fatalf("OpenRegular(%s): %v", p, err)
		}
		fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_NONBLOCK != 0 {
			t.Errorf("%s: flags %#x, %v: O_NONBLOCK left set", p, fl, err)
		}
		b := make([]byte, 8)
		n, _ := f.Read(b)
		if string(b[:n]) != "data" {
			t.Errorf("%s read %q", p, b[:n])
		}
		f.Close()
	}
	// At: relative to a directory, never through a link.
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	if f, err := OpenRegularAt(dfd, "reg", reg); err != nil {
		t.Errorf("OpenRegularAt: %v", err)
	} else {
		f.Close()
	}
	returnsWithin(t, 5*time.Second, func() {
		if _, err := OpenRegularAt(dfd, "fifo", fifo); !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Errorf("OpenRegularAt(fifo): %v", err)
		}
	})
}

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadRegular(p, 10); err != nil || string(b) != "0123456789" {
		t.Errorf("ReadRegular = %q, %v", b, err)
	}
	if _, err := ReadRegular(p, 9); !errors.Is(err, snapshotfmt.ErrTooLarge) {
		t.Errorf("over the bound: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	returnsWithin(t, 5*time.Second, func() {
		if _, err := ReadRegular(fifo, 10); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
			t.Errorf("fifo: %v", err)
		}
	})
}
