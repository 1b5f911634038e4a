package dataset_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/fixtures"
)

// Arrow IPC exports are uncompressed unless --compression says otherwise
// (JavaScript's apache-arrow cannot read zstd bodies), and the per-worker
// sibling follows the same setting. A compressed IPC buffer carries an
// 8-byte length prefix, so a compressed file never has the uncompressed
// file's size: equal sizes mean equal compression.
func TestArrowCompressionDefaultAndSibling(t *testing.T) {
	dir := t.TempDir()
	s := generate(t, filepath.Join(dir, "snap"), fixtures.Spec{Buckets: 4, Width: 2, Keys: 300, ValueSpread: true})
	sizes := map[string][2]int64{}
	for _, c := range []string{"", "none", "zstd"} {
		// Same name in each run: the metadata names the sibling.
		if err := os.Mkdir(filepath.Join(dir, "c-"+c), 0o755); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "c-"+c, "x.arrow")
		res, err := dataset.Export(ctx, s, out, dataset.ExportOptions{Format: dataset.Arrow, Compression: c})
		if err != nil {
			t.Fatal(err)
		}
		if res.WorkerStateFile == "" {
			t.Fatal("no per-worker state file")
		}
		a, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.Stat(res.WorkerStateFile)
		if err != nil {
			t.Fatal(err)
		}
		sizes[c] = [2]int64{a.Size(), b.Size()}
	}
	if sizes[""] != sizes["none"] {
		t.Fatalf("default Arrow export sizes (data, workers) %v, uncompressed %v: the default must be uncompressed", sizes[""], sizes["none"])
	}
	if sizes["zstd"][0] == sizes["none"][0] || sizes["zstd"][1] == sizes["none"][1] {
		t.Fatalf("zstd sizes %v equal the uncompressed %v: --compression zstd was not applied to both files", sizes["zstd"], sizes["none"])
	}
}
