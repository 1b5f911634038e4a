package plan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// manifestOf is a manifest with n buckets of `per` logical bytes and 10
// entries each, in one data file of `per*n/2` bytes.
func manifestOf(n int, mapping snapshotfmt.Mapping, per uint64) *snapshotfmt.Manifest {
	m := &snapshotfmt.Manifest{
		Partitioning:  snapshotfmt.Partitioning{Hash: snapshotfmt.HashName, Mapping: mapping, Buckets: uint32(n)},
		BucketEntries: make([]uint64, n), BucketBytes: make([]uint64, n),
		Files: []snapshotfmt.DataFile{{Size: int64(per) * int64(n) / 2}},
	}
	for b := range n {
		m.BucketEntries[b], m.BucketBytes[b] = 10, per
	}
	return m
}

func TestForRewriteStrategy(t *testing.T) {
	mod, rng := snapshotfmt.MappingMod, snapshotfmt.MappingRange
	cases := []struct {
		n      int
		from   snapshotfmt.Mapping
		m      int
		to     snapshotfmt.Mapping
		memory int64
		want   Strategy
		passes int
		groups int
		reason string
	}{
		{8, mod, 64, mod, 1 << 30, StrategySplit, 1, 1, "multiple"},
		{8, rng, 64, rng, 1 << 30, StrategySplit, 1, 1, "multiple"},
		{8, mod, 8, mod, 1 << 30, StrategySplit, 1, 1, "same bucket count"},
		{4, mod, 1024, mod, 1 << 30, StrategySplit, 1, 1, "multiple"},
		{1, mod, 32768, mod, 1 << 30, StrategySplit, 1, 1, "multiple"},
		{128, rng, 1000, rng, 1 << 30, StrategyMerge, 1, 1, "range to range"},
		{1000, rng, 128, rng, 1 << 30, StrategyMerge, 1, 1, "range to range"},
		{4096, rng, 16, rng, 1 << 30, StrategyShuffle, 1, 1, "merge limit"},
		{64, mod, 8, mod, 1 << 30, StrategyMerge, 1, 1, "folds 8"},
		{4096, mod, 1, mod, 1 << 30, StrategyShuffle, 1, 1, "merge limit"},
		{128, mod, 1000, mod, 1 << 30, StrategyShuffle, 1, 8, "gcd(128, 1000) = 8"},
		{8, mod, 7, mod, 1 << 30, StrategyShuffle, 1, 1, "mod 8 to mod 7"},
		{8, mod, 64, rng, 1 << 30, StrategyShuffle, 1, 1, "mapping changes"},
	}
	for _, c := range cases {
		m := manifestOf(c.n, c.from, 1000)
		to := snapshotfmt.Partitioning{Hash: snapshotfmt.HashName, Mapping: c.to, Buckets: uint32(c.m)}
		p := ForRewriteWith(m, to, Resources{Memory: c.memory, Parallelism: 2})
		if p.Strategy != c.want || p.Passes != c.passes || p.Groups != c.groups || !strings.Contains(p.Reason, c.reason) {
			t.Errorf("%s%d->%s%d: %s passes %d groups %d (%s); want %s passes %d groups %d (%q)",
				c.from, c.n, c.to, c.m, p.Strategy, p.Passes, p.Groups, p.Reason, c.want, c.passes, c.groups, c.reason)
		}
		if p.ReadBytes < p.SourceBytes*int64(p.Passes) || p.TargetDiskBytes < p.SourceBytes || p.PeakMemory < FixedOverhead {
			t.Errorf("%s%d->%s%d: estimates %+v", c.from, c.n, c.to, c.m, p)
		}
	}
}

func TestForRewriteSpillEstimate(t *testing.T) {
	m := manifestOf(128, snapshotfmt.MappingMod, 1<<20) // 128 MiB logical
	to := snapshotfmt.Partitioning{Hash: snapshotfmt.HashName, Mapping: snapshotfmt.MappingMod, Buckets: 1000}

	// A budget above twice the whole: grouped, nothing spills.
	p := ForRewriteWith(m, to, Resources{Memory: 1 << 30, Parallelism: 2})
	if p.Groups != 8 || p.SpillBytes != 0 || p.TmpDiskBytes != 0 {
		t.Fatalf("big budget spills %d / %d", p.SpillBytes, p.TmpDiskBytes)
	}
	// 8 groups of 16 MiB; a 4 MiB budget holds none of them: the groups
	// are sorted as one, and everything spills once.
	p = ForRewriteWith(m, to, Resources{Memory: 4 << 20, Parallelism: 2})
	all := int64(128<<20 + 16*1280)
	if p.Groups != 1 || p.SpillBytes != all || p.TmpDiskBytes != all {
		t.Fatalf("groups %d spill %d tmp %d, want 1, %d and %d", p.Groups, p.SpillBytes, p.TmpDiskBytes, all, all)
	}
	// A budget that holds the whole once but not twice: the groups are
	// sorted as one, in memory (grouped, the waiting output would spill).
	p = ForRewriteWith(m, to, Resources{Memory: 200 << 20, Parallelism: 2})
	if p.Groups != 1 || p.SpillBytes != 0 {
		t.Fatalf("groups %d spill %d, want 1 and 0", p.Groups, p.SpillBytes)
	}
	if p.ReadBytes != p.SourceBytes+p.SpillBytes {
		t.Fatalf("read %d, want source plus spill", p.ReadBytes)
	}
	// The plan is a JSON document with stable names.
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"strategy":"shuffle"`, `"groups":1`, `"spill_bytes":`, `"peak_memory":`, `"target_disk_bytes":`} {
		if !strings.Contains(string(data), k) {
			t.Fatalf("plan JSON lacks %s: %s", k, data)
		}
	}
}

func TestFanOutLimit(t *testing.T) {
	cases := []struct {
		mem  int64
		p    int
		want int
	}{
		{1 << 40, 2, MaxFanOut},
		{64 << 20, 2, 8},
		{1, 2, 1},
		{1 << 30, 0, 256},
	}
	for _, c := range cases {
		if got := FanOutLimit(c.mem, c.p); got != c.want {
			t.Errorf("FanOutLimit(%d, %d) = %d, want %d", c.mem, c.p, got, c.want)
		}
	}
}

func TestForRewriteRangeChunks(t *testing.T) {
	m := manifestOf(128, snapshotfmt.MappingRange, 1000)
	to := snapshotfmt.Partitioning{Hash: snapshotfmt.HashName, Mapping: snapshotfmt.MappingRange, Buckets: 1000}
	// A roomy budget: chunks of 1000/gcd(128, 1000) = 125 new buckets end
	// on old bucket boundaries, so nothing is read twice.
	p := ForRewriteWith(m, to, Resources{Memory: 8 << 30, Parallelism: 2})
	if p.WritersPerTask != 125 || p.ReadBytes != p.SourceBytes {
		t.Fatalf("roomy: %d writers per task, read %d of %d", p.WritersPerTask, p.ReadBytes, p.SourceBytes)
	}
	// A tight budget: fewer writers, and shared boundary buckets read twice.
	p = ForRewriteWith(m, to, Resources{Memory: 64 << 20, Parallelism: 2})
	if p.WritersPerTask != 8 || p.ReadBytes <= p.SourceBytes {
		t.Fatalf("tight: %d writers per task, read %d of %d", p.WritersPerTask, p.ReadBytes, p.SourceBytes)
	}
}
