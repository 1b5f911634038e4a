package dataset_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// FuzzImport feeds arbitrary bytes to import as a dataset file: it must
// return a classified error or a snapshot, never panic or hang.
func FuzzImport(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*"))
	for _, p := range seeds {
		if data, err := os.ReadFile(p); err == nil && len(data) < 1<<20 {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		in := filepath.Join(dir, "in.parquet")
		if err := os.WriteFile(in, data, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := dataset.Import(ctx, in, filepath.Join(dir, "out"), dataset.ImportOptions{InferStates: true, Buckets: 3, NoVerify: true, Memory: 1 << 20, Dedupe: "last"})
		if err != nil {
			for _, class := range []error{snapshotfmt.ErrCorrupt, snapshotfmt.ErrInvalidArgument, snapshotfmt.ErrTooLarge, snapshotfmt.ErrUnsupported} {
				if errors.Is(err, class) {
					return
				}
			}
			t.Fatalf("unclassified error: %v", err)
		}
		if res.Entries > res.Rows {
			t.Fatalf("%d entries from %d rows", res.Entries, res.Rows)
		}
		// Every declared row is read, or the import fails.
		if res.RowsRead != res.RowsDeclared || res.Rows != res.RowsRead {
			t.Fatalf("read %d of %d declared rows (rows %d)", res.RowsRead, res.RowsDeclared, res.Rows)
		}
	})
}
