package verify

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebucket/rebucket/reader"
)

// TestMeasureAgainst times Equal on two real snapshots against a plain
// iteration of both (decompress and walk every entry, no hashing), for the
// cost report. Set REBUCKET_MEASURE_TARGET and REBUCKET_MEASURE_SOURCE.
func TestMeasureAgainst(t *testing.T) {
	tgt, src := os.Getenv("REBUCKET_MEASURE_TARGET"), os.Getenv("REBUCKET_MEASURE_SOURCE")
	if tgt == "" || src == "" {
		t.Skip("set REBUCKET_MEASURE_TARGET and REBUCKET_MEASURE_SOURCE")
	}
	ctx := context.Background()
	start := time.Now()
	var n atomic.Int64
	for _, dir := range []string{tgt, src} {
		s, err := reader.Open(dir, reader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = forEachFile(ctx, s, s.Manifest().Files, 2, func(k, v []byte) error { n.Add(1); return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	iterate := time.Since(start)
	start = time.Now()
	sum, err := Equal(ctx, tgt, src, EqualOptions{}, nil)
	if err != nil || !sum.Equal {
		t.Fatalf("err=%v equal=%v", err, sum != nil && sum.Equal)
	}
	t.Logf("iterate both (checksums + decompress + walk, %d entries): %s; verify.Equal: %s (%.2fx)",
		n.Load(), iterate, time.Since(start), time.Since(start).Seconds()/iterate.Seconds())
}
