package reader_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/writer"
)

// BenchmarkFileIter measures reading a snapshot's entries through
// FileIter (block decompression, the order and bounds checks), one op per
// entry: the scan every rewrite, verify and export starts with.
func BenchmarkFileIter(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "snap")
	m, err := fixtures.Generate(context.Background(), dir, fixtures.Spec{Buckets: 8, Width: 1, Keys: 20000, NoWorkerState: true}, writer.Options{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		b.Fatal(err)
	}
	df := m.Files[0]
	b.SetBytes(int64(m.TotalBytes() / m.TotalEntries()))
	b.ReportAllocs()
	var fi *reader.FileIter
	for b.Loop() {
		if fi == nil || !fi.Next() {
			if fi != nil {
				if err := fi.Err(); err != nil {
					b.Fatal(err)
				}
				fi.Close()
			}
			if fi, err = s.OpenFile(context.Background(), df, nil, nil); err != nil {
				b.Fatal(err)
			}
			if !fi.Next() {
				b.Fatal("empty file")
			}
		}
	}
	if fi != nil {
		fi.Close()
	}
}
