package rocksdbsst

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkLive reads every table under $ROCKSDBSST_BENCH_DIR (*.sst, e.g. a
// RocksDB directory) with Live; skipped without it.
func BenchmarkLive(b *testing.B) {
	dir := os.Getenv("ROCKSDBSST_BENCH_DIR")
	if dir == "" {
		b.Skip("ROCKSDBSST_BENCH_DIR not set")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	var tables []*Table
	var size int64
	for _, f := range files {
		tables = append(tables, openFile(b, f))
		st, _ := os.Stat(f)
		size += st.Size()
	}
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		n := 0
		if err := Live(tables, StringAppend([]byte(",")), func(k, v []byte) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n), "keys")
	}
}
