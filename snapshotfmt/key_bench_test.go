package snapshotfmt_test

import (
	"fmt"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Hot-path benchmarks of the per-entry work every reader, rewrite and
// verification does: decode an encoded key, hash the key, route it to a
// bucket and an owner. Run with -benchmem: all of them must report 0
// allocs/op.

func benchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = snapshotfmt.EncodeKey(uint32(i%128), uint16(1+i%3), fmt.Appendf(nil, "user-%09d", i), []byte("sub-00"))
	}
	return keys
}

func BenchmarkDecodeKey(b *testing.B) {
	keys := benchKeys(1024)
	b.ReportAllocs()
	var sink uint32
	for i := 0; b.Loop(); i++ {
		dk, err := snapshotfmt.DecodeKey(keys[i&1023])
		if err != nil {
			b.Fatal(err)
		}
		sink += dk.Bucket + uint32(len(dk.Key))
	}
	_ = sink
}

func BenchmarkAppendKey(b *testing.B) {
	key, sub := []byte("user-000000042"), []byte("sub-00")
	var buf []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = snapshotfmt.AppendKey(buf[:0], uint32(i), 2, key, sub)
	}
}

func BenchmarkHashAndRoute(b *testing.B) {
	keys := benchKeys(1024)
	for _, m := range []snapshotfmt.Mapping{snapshotfmt.MappingMod, snapshotfmt.MappingRange} {
		p, err := snapshotfmt.NewPartitioning(m, 1000)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(string(m), func(b *testing.B) {
			b.ReportAllocs()
			var sink int
			for i := 0; b.Loop(); i++ {
				enc := keys[i&1023]
				dk, _ := snapshotfmt.DecodeKey(enc)
				j := p.BucketOfHash(snapshotfmt.HashKey(dk.Key))
				sink += snapshotfmt.OwnerOf(int(j), 2, int(p.Buckets))
			}
			_ = sink
		})
	}
}
