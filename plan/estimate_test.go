package plan_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

func TestEstimateRewrite(t *testing.T) {
	to, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 64)
	p := plan.RewritePlan{To: to, Strategy: plan.StrategySplit, ReadBytes: 100 << 20, WriteBytes: 50 << 20, Parallelism: 2}
	rate := plan.ScanRate{Bytes: 100 << 20, Elapsed: time.Second}
	disk := plan.DiskRate{Bytes: 50 << 20, Elapsed: time.Second, FileFsync: 10 * time.Millisecond}
	e := plan.EstimateRewrite(p, rate, disk)
	// 100 MiB scanned and 100 MiB read back by the self-check at 100
	// MiB/s over 2, 50 MiB at 50 MiB/s, 19 files x 10ms / 2: one by size,
	// one per owner, 16 for the widest default cut width of 64 buckets.
	if e.CPUTime != time.Second || e.WriteTime != time.Second || e.Files != 1+2+16 || e.FileTime != 95*time.Millisecond ||
		e.Time != e.CPUTime+e.WriteTime+e.FileTime || e.Seconds != e.Time.Seconds() || e.HighSeconds != plan.RoughFactor*e.Seconds {
		t.Errorf("split: %+v", e)
	}
	p.Strategy, p.SpillBytes, p.Groups = plan.StrategyShuffle, 100<<20, 4
	e = plan.EstimateRewrite(p, rate, disk)
	// Spill is copied twice and written once.
	if e.CPUTime != 2*time.Second || e.WriteTime != 3*time.Second || e.Files != 1+2+16 {
		t.Errorf("shuffle: %+v", e)
	}
	if e := plan.EstimateRewrite(p, plan.ScanRate{}, disk); e.Time != 0 || e.Basis == "" {
		t.Errorf("no rate: %+v", e)
	}
}

func TestMeasure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	if _, err := fixtures.Generate(context.Background(), dir, fixtures.Spec{Buckets: 4, Keys: 500}, writer.Options{FileSize: 8 << 10}); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := plan.MeasureScanRate(context.Background(), s, 1<<30)
	if err != nil || r.Files != len(s.Manifest().Files) || r.Entries != s.Manifest().TotalEntries() || r.BytesPerSecond() <= 0 {
		t.Errorf("scan: %+v %v", r, err)
	}
	tmp := t.TempDir()
	d, err := plan.MeasureDisk(tmp)
	if err != nil || d.Bytes != 16<<20 || d.Elapsed <= 0 || d.FileFsync <= 0 {
		t.Errorf("disk: %+v %v", d, err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("probe left %d entries behind", len(ents))
	}
}
