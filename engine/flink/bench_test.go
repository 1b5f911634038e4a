package flink

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkRewrite rewrites a generated probe savepoint from max
// parallelism 8 to 128. Size: REBUCKET_FLINK_BENCH_KEYS keys per keyed
// operator (default 100000; BENCHMARKS.md uses 1000000 and 10000000).
func BenchmarkRewrite(b *testing.B) {
	keys := 100000
	if s := os.Getenv("REBUCKET_FLINK_BENCH_KEYS"); s != "" {
		keys, _ = strconv.Atoi(s)
	}
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	if err := Generate(src, GenerateOptions{Keys: keys}); err != nil {
		b.Fatal(err)
	}
	var size int64
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		fi, _ := e.Info()
		size += fi.Size()
	}
	b.SetBytes(size)
	b.ResetTimer()
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		dst := filepath.Join(dir, "out"+strconv.Itoa(i))
		c0 := cpuTime()
		res, err := Rewrite(context.Background(), src, dst, RewriteOptions{MaxParallelism: 128})
		cpu += cpuTime() - c0
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Entries), "entries")
		b.StopTimer()
		os.RemoveAll(dst)
		b.StartTimer()
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}
