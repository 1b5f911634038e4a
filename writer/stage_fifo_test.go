package writer

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A FIFO planted as the marker of a temporary directory beside the target
// does not block Begin (before: open(2) blocked every writing command past
// SIGTERM); the directory, holding nothing else, is removed as stale.
func TestBeginIgnoresFIFOMarker(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "out")
	tmp := filepath.Join(dir, ".out"+tmpInfix+"x")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(tmp, MarkerName), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		st, err := Begin(target, false)
		if err == nil {
			st.Abort()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Begin blocked on a FIFO marker")
	}
	if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want removed", tmp, err)
	}
}
