package writer_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// BenchmarkSSTableEncode measures BucketWriter.Add, the per-entry cost of
// writing a snapshot (order check, stats, Pebble block building and
// compression), per compression. One op is one entry; -benchmem shows the
// allocations of the per-entry path.
func BenchmarkSSTableEncode(b *testing.B) {
	const n = 1 << 14
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = snapshotfmt.EncodeKey(0, 1, fmt.Appendf(nil, "user-%09d", i), nil)
	}
	value := make([]byte, 64)
	for i := range value {
		value[i] = byte(i * 7)
	}
	for _, comp := range []string{"snappy", "zstd", "none"} {
		b.Run(comp, func(b *testing.B) {
			part, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 1<<16)
			s, err := writer.Create(filepath.Join(b.TempDir(), "snap"), writer.Header{
				Partitioning: part, WidthAtWrite: 1,
				States: []snapshotfmt.State{{ID: 1, Step: "s", Name: "v", Kind: snapshotfmt.KindValue}},
			}, writer.Options{Compression: comp})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Abort()
			bw := s.NewBucketWriter()
			defer bw.Abort()
			b.SetBytes(int64(len(keys[0]) + len(value)))
			b.ReportAllocs()
			key := make([]byte, len(keys[0]))
			for i := 0; b.Loop(); i++ {
				// Bucket i/n, key i%n: strictly increasing across the loop.
				copy(key, keys[i%n])
				snapshotfmt.WithBucket(key, uint32(i/n))
				if err := bw.Add(key, value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
