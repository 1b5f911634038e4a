package verify_test

import (
	"fmt"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
)

// BenchmarkFingerprinterAdd measures the per-entry work of verification
// and of a rewrite's self-check: decode the key, hash it into the layout,
// hash the entry's identity and value, add to the bucket's fingerprint.
// It must not allocate.
func BenchmarkFingerprinterAdd(b *testing.B) {
	states := []snapshotfmt.State{
		{ID: 1, Step: "count", Name: "per_user", Kind: snapshotfmt.KindValue},
		{ID: 2, Step: "sessions", Name: "open", Kind: snapshotfmt.KindMap},
	}
	layout, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 1024)
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = snapshotfmt.EncodeKey(uint32(i%128), uint16(1+i%2), fmt.Appendf(nil, "user-%09d", i), []byte("s1"))
	}
	value := make([]byte, 64)
	f := verify.NewFingerprinter(layout, states)
	b.SetBytes(int64(len(keys[0]) + len(value)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, _, err := f.Add(keys[i&1023], value); err != nil {
			b.Fatal(err)
		}
	}
}
