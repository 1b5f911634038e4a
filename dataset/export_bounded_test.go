package dataset_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// TestPartitionedExportBoundedWriters: a partitioned export keeps a bounded
// number of files open whatever the partition count (issue 14, item 7: a
// writer per bucket took 10.7 GB at 16384 buckets and ran out of file
// descriptors at 65536). By bucket, one file at a time; by state, at most
// maxStateWriters (here 1, so three passes). The files still hold every
// entry: imported back, they equal the source.
func TestPartitionedExportBoundedWriters(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "snap")
	s := generate(t, src, fixtures.Spec{Buckets: 128, Width: 4, Keys: 600})
	nonEmpty := 0
	for _, c := range s.Manifest().BucketEntries {
		if c > 0 {
			nonEmpty++
		}
	}
	defer dataset.SetMaxStateWriters(dataset.SetMaxStateWriters(1))
	cases := []struct {
		name      string
		format    dataset.Format
		by        string
		wantFiles int
	}{
		{"parquet by bucket", dataset.Parquet, "bucket", nonEmpty},
		{"arrow by bucket", dataset.Arrow, "bucket", nonEmpty},
		{"parquet by state, one state per pass", dataset.Parquet, "state", 3},
		{"arrow by state, one state per pass", dataset.Arrow, "state", 3},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			maxOpen := 0
			dataset.SetTestOnOpen(func(n int) { maxOpen = max(maxOpen, n) })
			defer dataset.SetTestOnOpen(nil)
			out := filepath.Join(dir, "out", string(rune('a'+i)))
			os.MkdirAll(filepath.Dir(out), 0o755)
			res, err := dataset.Export(ctx, s, out, dataset.ExportOptions{
				Format: c.format, PartitionBy: c.by, View: reader.ArrowOptions{BatchRows: 700},
			})
			if err != nil {
				t.Fatal(err)
			}
			if maxOpen != 1 {
				t.Fatalf("%d files open at once, want 1", maxOpen)
			}
			if len(res.Files) != c.wantFiles || res.Rows != s.Manifest().TotalEntries() {
				t.Fatalf("%d files (want %d), %d rows (want %d)", len(res.Files), c.wantFiles, res.Rows, s.Manifest().TotalEntries())
			}
			target := filepath.Join(dir, "back", string(rune('a'+i)))
			os.MkdirAll(filepath.Dir(target), 0o755)
			if _, err := dataset.Import(ctx, out, target, dataset.ImportOptions{InferStates: true, Buckets: 64}); err != nil {
				t.Fatal(err)
			}
			assertEqual(t, target, src)
		})
	}
}

// TestExportRefusesUpFront: what Parquet or the file system cannot take is
// refused before anything is written, with exit 2's error class (issue 14,
// low items: --row-group-size 1 failed after writing 32767 row groups, exit
// 4; --out under a regular file failed at stat, exit 4).
func TestExportRefusesUpFront(t *testing.T) {
	dir := t.TempDir()
	s := generate(t, filepath.Join(dir, "snap"), fixtures.Spec{Buckets: 4, Width: 2, Keys: 9000, SubKeys: 6})
	if n := s.Manifest().TotalEntries(); n <= 32767*2 {
		t.Fatalf("the source has %d entries; the test needs more than 2x32767", n)
	}
	file := filepath.Join(dir, "afile")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	cases := []struct {
		name string
		out  string
		opts dataset.ExportOptions
	}{
		{"row group of 1", filepath.Join(work, "x.parquet"), dataset.ExportOptions{RowGroupRows: 1}},
		{"row group of 1 by state", filepath.Join(work, "x"), dataset.ExportOptions{RowGroupRows: 1, PartitionBy: "state"}},
		{"out under a file", filepath.Join(file, "x.parquet"), dataset.ExportOptions{}},
		{"partitioned out under a file", filepath.Join(file, "x"), dataset.ExportOptions{PartitionBy: "bucket"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := dataset.Export(ctx, s, c.out, c.opts)
			if !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
				t.Fatalf("err %v, want ErrInvalidArgument", err)
			}
			if ents, _ := os.ReadDir(work); len(ents) != 0 {
				t.Fatalf("%s was written to", ents[0].Name())
			}
		})
	}
}
