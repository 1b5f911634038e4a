package writer

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A run killed between creating its temporary directory and writing its
// marker leaves an empty (or torn-marker) directory: the next run removes
// it. An unmarked directory with content may hold a complete output (a
// crash between the marker's removal and the rename): it is kept and
// listed.
func TestBeginRemovesUnmarkedEmptyTemp(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "out")
	empty := filepath.Join(parent, ".out"+tmpInfix+"0000000000000001")
	torn := filepath.Join(parent, ".out"+tmpInfix+"0000000000000002")
	full := filepath.Join(parent, ".out"+tmpInfix+"0000000000000003")
	for _, d := range []string{empty, torn, full} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(torn, MarkerName), []byte(`{"run_id":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "MANIFEST.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := Begin(target, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	for _, d := range []string{empty, torn} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s was not removed: %v", d, err)
		}
		if !slices.Contains(st.Removed, d) {
			t.Errorf("%s not in Removed %v", d, st.Removed)
		}
	}
	if _, err := os.Stat(full); err != nil {
		t.Errorf("an unmarked directory with content was removed: %v", err)
	}
	if !slices.Contains(st.Leftover, full) {
		t.Errorf("%s not in Leftover %v", full, st.Leftover)
	}
}
