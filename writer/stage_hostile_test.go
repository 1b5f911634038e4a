package writer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
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

// A snapshot whose manifest would exceed what a reader accepts is refused
// at Commit and nothing is published: huge keys cut into many files.
func TestCommitRefusesOversizedManifest(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "out")
	part, err := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 64)
	if err != nil {
		t.Fatal(err)
	}
	states := []snapshotfmt.State{{ID: 1, Step: "s", Name: "v", Kind: snapshotfmt.KindValue}}
	w, err := Create(target, Header{Partitioning: part, WidthAtWrite: 1, States: states}, Options{FileSize: 1, Compression: "none"})
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	for i := range 20 {
		k := bytes.Repeat([]byte{byte(i)}, 1<<20) // 1 MiB keys: 4 MiB of bounds per file
		keys = append(keys, snapshotfmt.EncodeKey(part.Bucket(k), 1, k, nil))
	}
	slices.SortFunc(keys, bytes.Compare)
	bw := w.NewBucketWriter()
	for _, k := range keys {
		if err := bw.Add(k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = w.Commit()
	if !errors.Is(err, snapshotfmt.ErrTooLarge) {
		t.Fatalf("want ErrTooLarge, got %v", err)
	}
	ents, _ := os.ReadDir(parent)
	if len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}
