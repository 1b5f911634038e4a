package dataset_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/fixtures"
)

// A partitioned export is a clean Hive layout (issue 15 item 5): every file
// a data glob (dir/**/*.EXT) matches sits under key=value directories only,
// so DuckDB's hive_partitioning does not fail with "Hive partition
// mismatch" on the per-worker table; and the export still imports with its
// per-worker state.
func TestPartitionedExportIsCleanHive(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "snap")
	s := generate(t, src, fixtures.Spec{Buckets: 4, Width: 2, Keys: 100})
	for _, f := range []dataset.Format{dataset.Parquet, dataset.Arrow} {
		for _, by := range []string{"state", "bucket"} {
			out := filepath.Join(dir, string(f)+"-"+by)
			res, err := dataset.Export(ctx, s, out, dataset.ExportOptions{Format: f, PartitionBy: by})
			if err != nil {
				t.Fatal(err)
			}
			if res.WorkerStateFile == "" {
				t.Fatal("no per-worker state file")
			}
			err = filepath.WalkDir(out, func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() || filepath.Ext(p) != f.Ext() {
					return err
				}
				rel, _ := filepath.Rel(out, p)
				for _, d := range strings.Split(filepath.Dir(rel), string(filepath.Separator)) {
					if !strings.Contains(d, "=") {
						t.Errorf("%s export by %s: %s matches %s/**/*%s outside the Hive layout", f, by, rel, out, f.Ext())
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			back := filepath.Join(dir, "back-"+string(f)+"-"+by)
			if _, err := dataset.Import(ctx, out, back, dataset.ImportOptions{Buckets: 3}); err != nil {
				t.Fatal(err)
			}
			assertEqual(t, back, src)
		}
	}
}
