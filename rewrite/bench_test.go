package rewrite

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// BenchmarkRewrite rewrites the snapshot named by REBUCKET_BENCH_SOURCE to
// REBUCKET_BENCH_BUCKETS buckets (mapping REBUCKET_BENCH_MAPPING, memory
// REBUCKET_BENCH_MEMORY bytes, compression REBUCKET_BENCH_COMPRESSION,
// self-check off when REBUCKET_BENCH_NOVERIFY=1), for profiling on real
// sizes:
//
//	REBUCKET_BENCH_SOURCE=/tmp/b10m REBUCKET_BENCH_BUCKETS=64 go test -run X -bench Rewrite -benchtime 1x -cpuprofile cpu.out ./rewrite
func BenchmarkRewrite(b *testing.B) {
	src := os.Getenv("REBUCKET_BENCH_SOURCE")
	if src == "" {
		b.Skip("REBUCKET_BENCH_SOURCE not set")
	}
	m, _ := strconv.Atoi(os.Getenv("REBUCKET_BENCH_BUCKETS"))
	mem, _ := strconv.ParseInt(os.Getenv("REBUCKET_BENCH_MEMORY"), 10, 64)
	to := snapshotfmt.Partitioning{Buckets: uint32(m), Mapping: snapshotfmt.Mapping(os.Getenv("REBUCKET_BENCH_MAPPING"))}
	for i := 0; i < b.N; i++ {
		dst := filepath.Join(b.TempDir(), "dst")
		sum, err := Run(context.Background(), Options{Source: src, Target: dst, To: to, Memory: mem,
			Compression: os.Getenv("REBUCKET_BENCH_COMPRESSION"), NoVerify: os.Getenv("REBUCKET_BENCH_NOVERIFY") == "1"})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(sum.SourceBytes)
		b.ReportMetric(float64(sum.Entries), "entries")
		os.RemoveAll(dst)
	}
}
