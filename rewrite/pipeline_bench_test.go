package rewrite

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// BenchmarkPipeline runs whole rewrites of a generated snapshot (about
// 100k entries) per strategy and reports time and allocations per entry:
// the per-entry path should allocate nothing, so allocs/entry is the
// per-file and per-batch overhead spread over the entries.
func BenchmarkPipeline(b *testing.B) {
	dir := b.TempDir()
	gen := func(name string, m snapshotfmt.Mapping) string {
		p := filepath.Join(dir, name)
		if _, err := fixtures.Generate(context.Background(), p, fixtures.Spec{Buckets: 128, Width: 4, Mapping: m, Keys: 16000, NoWorkerState: true}, writer.Options{}); err != nil {
			b.Fatal(err)
		}
		return p
	}
	mod, rng := gen("mod", snapshotfmt.MappingMod), gen("range", snapshotfmt.MappingRange)
	for _, c := range []struct {
		name   string
		src    string
		to     uint32
		memory int64
	}{
		{"split-128-1024", mod, 1024, 0},
		{"merge-128-1000", rng, 1000, 0},
		{"shuffle-128-1000", mod, 1000, 1 << 30},
		{"shuffle-spill-128-1000", mod, 1000, 2 << 20},
	} {
		b.Run(c.name, func(b *testing.B) {
			var entries uint64
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			for b.Loop() {
				dst := filepath.Join(dir, "out")
				sum, err := Run(context.Background(), Options{Source: c.src, Target: dst, To: snapshotfmt.Partitioning{Buckets: c.to}, Memory: c.memory, SkipDiskCheck: true})
				if err != nil {
					b.Fatal(err)
				}
				entries += sum.Entries
				os.RemoveAll(dst)
			}
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(entries), "ns/entry")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(entries), "allocs/entry")
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(entries), "B/entry")
		})
	}
}
