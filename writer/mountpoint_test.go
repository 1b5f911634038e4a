package writer

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

func TestIsMountPoint(t *testing.T) {
	dir := t.TempDir()
	if isMountPoint(dir) || isMountPoint(filepath.Join(dir, "absent")) {
		t.Fatal("a plain directory taken for a mount point")
	}
	if !isMountPoint("/proc") {
		t.Fatal("/proc not taken for a mount point")
	}
}

// An empty mount point as the target passed every check and failed at
// publish with "device or resource busy" (exit 4), after all the work.
// Now Begin refuses it (exit 3). Mounting needs privileges; without them
// the test is skipped (TestIsMountPoint still runs).
func TestBeginRefusesMountPoint(t *testing.T) {
	target := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "none", target).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", target).Run() })
	for _, force := range []bool{false, true} {
		s, err := Begin(target, force)
		if err == nil {
			s.Abort()
			t.Fatalf("force %v: Begin accepted a mount point", force)
		}
		if !errors.Is(err, snapshotfmt.ErrRefused) || !strings.Contains(err.Error(), "mount point") {
			t.Fatalf("force %v: %v", force, err)
		}
	}
	// A directory inside it is a fine target.
	s, err := Begin(filepath.Join(target, "snapshot"), false)
	if err != nil {
		t.Fatal(err)
	}
	s.Abort()
}
