package rewrite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// The files of a rewrite follow the bytes written, not the bucket count:
// split, merge and grouped shuffle write contiguous bucket ranges per
// owner, so 32768 and 65536 buckets give as few files as 1024 (before,
// one file per new bucket).
func TestFileCountIndependentOfM(t *testing.T) {
	tmp := t.TempDir()
	mod, rng := snapshotfmt.MappingMod, snapshotfmt.MappingRange
	for _, d := range []string{"mod", "rng", "big"} {
		os.Mkdir(filepath.Join(tmp, d), 0o755)
	}
	srcMod := generate(t, filepath.Join(tmp, "mod"), fixtures.Spec{Buckets: 16, Width: 2, Mapping: mod, Keys: 3000, ValueSpread: true, Seed: 3}, writer.Options{})
	srcRng := generate(t, filepath.Join(tmp, "rng"), fixtures.Spec{Buckets: 16, Width: 2, Mapping: rng, Keys: 3000, ValueSpread: true, Seed: 4}, writer.Options{})
	srcBig := generate(t, filepath.Join(tmp, "big"), fixtures.Spec{Buckets: 4096, Width: 2, Mapping: mod, Keys: 3000, ValueSpread: true, Seed: 5}, writer.Options{})
	for _, c := range []struct {
		src  string
		to   snapshotfmt.Mapping
		m    int
		want plan.Strategy
	}{
		{srcMod, mod, 1024, plan.StrategySplit},
		{srcMod, mod, 32768, plan.StrategySplit},
		{srcMod, mod, 65536, plan.StrategySplit},
		{srcRng, rng, 1024, plan.StrategySplit},
		{srcRng, rng, 65536, plan.StrategySplit},
		{srcBig, mod, 1024, plan.StrategyMerge},
		{srcBig, mod, 2048, plan.StrategyMerge},
		{srcMod, mod, 1000, plan.StrategyShuffle}, // gcd 8: grouped
		{srcMod, mod, 32760, plan.StrategyShuffle},
	} {
		name := fmt.Sprintf("%s-%s%d", filepath.Base(c.src), c.to, c.m)
		t.Run(name, func(t *testing.T) {
			to, err := snapshotfmt.NewPartitioning(c.to, c.m)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(tmp, name)
			sum, err := Run(context.Background(), Options{Source: c.src, Target: dst, To: to, Parallelism: 2, Memory: 64 << 20, ForWidths: []int{}})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Strategy != c.want {
				t.Fatalf("strategy %s, want %s", sum.Strategy, c.want)
			}
			// Two owners, each cut at the width at write (2): at most 4
			// files and a few more where an owner's range is not a worker's.
			if sum.TargetFiles > 6 {
				t.Fatalf("%d files for %d buckets (%d entries): want a handful, not one per bucket", sum.TargetFiles, c.m, sum.Entries)
			}
			sameContents(t, readAll(t, c.src, nil), readAll(t, dst, nil), nil)
			os.RemoveAll(dst)
		})
	}
}

// --for-width cuts files where each listed width's workers begin, the
// manifest says so, and a load at those widths ingests every file whole.
func TestForWidthCutsAndLoadsWhole(t *testing.T) {
	tmp := t.TempDir()
	src := generate(t, tmp, fixtures.Spec{Buckets: 8, Width: 3, Keys: 4000, ValueSpread: true, Seed: 9}, writer.Options{})
	dst := filepath.Join(tmp, "dst")
	sum, err := Run(context.Background(), Options{Source: src, Target: dst, To: snapshotfmt.Partitioning{Buckets: 240}, Parallelism: 2, ForWidths: []int{7, 40}})
	if err != nil {
		t.Fatal(err)
	}
	m := sum.Manifest
	if !slices.Equal(m.CutWidths, []int{3, 7, 40}) {
		t.Fatalf("cut_widths %v, want [3 7 40] (the width at write joins the asked ones)", m.CutWidths)
	}
	for _, w := range []int{3, 7, 40} {
		for _, f := range m.Files {
			if snapshotfmt.OwnerOf(int(f.BucketLo), w, 240) != snapshotfmt.OwnerOf(int(f.BucketHi), w, 240) {
				t.Fatalf("width %d: %s holds buckets %d..%d of two workers", w, f.Path, f.BucketLo, f.BucketHi)
			}
		}
		if !plan.CutFor(m, w) {
			t.Fatalf("CutFor(%d) false", w)
		}
	}
	if len(m.Files) < 40 || len(m.Files) > 40+7+3+2 {
		t.Fatalf("%d files: want about one per worker at width 40", len(m.Files))
	}
	if plan.CutFor(m, 9) {
		t.Fatal("CutFor(9): the files were not cut for 9 workers (some file must straddle)")
	}
	s, err := reader.Open(dst, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		w       int
		clipped bool
	}{{7, false}, {40, false}, {9, true}} {
		l, err := s.NewLoader(c.w, reader.PolicyReject)
		if err != nil {
			t.Fatal(err)
		}
		var rewritten, ingested int
		for i := range c.w {
			st, err := l.BuildStore(context.Background(), i, filepath.Join(tmp, fmt.Sprintf("load%d-%d", c.w, i)))
			if err != nil {
				t.Fatal(err)
			}
			rewritten += st.RewrittenFiles
			ingested += st.IngestedFiles
		}
		if (rewritten > 0) != c.clipped || ingested == 0 {
			t.Fatalf("load at width %d: %d files rewritten, %d ingested whole; clipping expected: %v", c.w, rewritten, ingested, c.clipped)
		}
	}
}

// Runs that wait for their turn past the budget wait on disk, and come
// back whole: every run spills here, and the output is the same.
func TestCollectorSpills(t *testing.T) {
	oldBudget, oldChunk := testCollectorBudget, spillChunk
	testCollectorBudget, spillChunk = 0, 0
	defer func() { testCollectorBudget, spillChunk = oldBudget, oldChunk }()
	tmp := t.TempDir()
	src := generate(t, tmp, fixtures.Spec{Buckets: 8, Width: 2, Keys: 3000, ValueSpread: true, Seed: 11}, writer.Options{})
	sc := readAll(t, src, nil)
	spill := filepath.Join(tmp, "spill")
	os.Mkdir(spill, 0o755)
	for _, m := range []int{64, 1000, 4} { // split, grouped shuffle, merge
		dst := filepath.Join(tmp, fmt.Sprint("dst", m))
		// A budget that keeps the shuffle grouped (gcd(8, 1000) = 8); no
		// cut widths past the width at write (2), so each split owner holds
		// three rounds of 8 buckets, and two of them wait.
		sum, err := Run(context.Background(), Options{Source: src, Target: dst, To: snapshotfmt.Partitioning{Buckets: uint32(m)}, Parallelism: 3, Memory: 1 << 30, TmpDir: spill, ForWidths: []int{}})
		if err != nil {
			t.Fatal(err)
		}
		// A merge task mostly holds its owner's lease and writes
		// straight through; whether one waits depends on timing.
		if sum.Strategy == plan.StrategyShuffle && sum.Plan.Groups != 8 {
			t.Fatalf("shuffle in %d groups, want 8", sum.Plan.Groups)
		}
		if sum.SpilledBytes == 0 && sum.Strategy != plan.StrategyMerge {
			t.Fatalf("%d buckets (%s): nothing spilled", m, sum.Strategy)
		}
		sameContents(t, sc, readAll(t, dst, nil), nil)
		if ents, _ := os.ReadDir(spill); len(ents) != 0 {
			t.Fatalf("spill directory not empty: %v", ents)
		}
	}
}
