package dataset_test

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/writer"
)

// TestImportAllocationsPerRow bounds the heap allocations an import makes
// per row. Garbage made per row is what let an import's heap grow to twice
// its sort budget and more (the collector lets the heap double between
// cycles): a string per row for the state's name, a copy per row of Arrow
// string cells. What remains is per page, per sort chunk and per output
// file.
func TestImportAllocationsPerRow(t *testing.T) {
	if testing.Short() {
		t.Skip("imports a few tens of thousands of rows")
	}
	dir := t.TempDir()
	// Large data files, so the export's batches are full (a batch never
	// spans files) and per-batch costs stay per batch.
	src := filepath.Join(dir, "snap")
	if _, err := fixtures.Generate(ctx, src, fixtures.Spec{Buckets: 8, Width: 2, Keys: 6000, ValueSpread: true}, writer.Options{FileSize: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(src, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []dataset.Format{dataset.Parquet, dataset.Arrow} {
		t.Run(string(f), func(t *testing.T) {
			out := filepath.Join(dir, "x"+f.Ext())
			if _, err := dataset.Export(ctx, s, out, dataset.ExportOptions{Format: f, View: reader.ArrowOptions{BatchRows: 16 << 10}}); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			res, err := dataset.Import(ctx, out, filepath.Join(dir, "imp-"+string(f)), dataset.ImportOptions{InferStates: true,
				Buckets: 16, Memory: 8 << 20, NoVerify: true,
			})
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if res.Rows < 20000 {
				t.Fatalf("only %d rows: too few to tell per-row from fixed allocations", res.Rows)
			}
			perRow := float64(after.Mallocs-before.Mallocs) / float64(res.Rows)
			t.Logf("%s: %d rows, %.3f allocations per row, %.1f bytes allocated per row", f, res.Rows, perRow,
				float64(after.TotalAlloc-before.TotalAlloc)/float64(res.Rows))
			if perRow > 0.5 {
				t.Fatalf("%.2f heap allocations per imported row; want well under one (per page and per file only)", perRow)
			}
		})
	}
}
