package writer

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Nothing a run writes is readable by other users: a snapshot holds a
// job's state.
func TestOutputPermissionsAreRestrictive(t *testing.T) {
	target := filepath.Join(t.TempDir(), "snap")
	p, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 4)
	s, err := Create(target, Header{Partitioning: p, WidthAtWrite: 1, States: []snapshotfmt.State{{ID: 1, Step: "s", Name: "v", Kind: snapshotfmt.KindValue}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bw := s.NewBucketWriter()
	if err := bw.Add(snapshotfmt.EncodeKey(p.Bucket([]byte("k")), 1, []byte("k"), nil), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteWorkerState("src", "pos", snapshotfmt.RuleSplit, [][][]byte{{[]byte("p0")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = filepath.WalkDir(target, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if perm := info.Mode().Perm(); perm&0o007 != 0 {
			t.Errorf("%s has mode %v: other users can reach it", path, perm)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 6 { // the directory, data/, workers/, a table, a worker file, the manifest
		t.Fatalf("walked only %d entries", n)
	}
}
