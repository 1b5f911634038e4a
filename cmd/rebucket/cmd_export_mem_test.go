package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/writer"
)

// TestExportPartitionedPeakMemory exports a snapshot of 16384 buckets
// partitioned by bucket, in the built binary, and checks that its peak
// resident memory stays within plan.FixedOverhead and that every non-empty
// bucket got its file. Issue 14, item 7: a writer per bucket held 10.7 GB
// (Parquet) and over 23 GB (Arrow) here, and ran out of file descriptors at
// 65536 buckets.
func TestExportPartitionedPeakMemory(t *testing.T) {
	bin := buildBinary(t)
	tmp := t.TempDir()
	src := filepath.Join(tmp, "snap")
	m, err := fixtures.Generate(context.Background(), src, fixtures.Spec{Buckets: 16384, Width: 4, Keys: 3000}, writer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nonEmpty := 0
	for _, c := range m.BucketEntries {
		if c > 0 {
			nonEmpty++
		}
	}
	for _, format := range []string{"parquet", "arrow"} {
		t.Run(format, func(t *testing.T) {
			withinBound(t, func(attempt int) int64 {
				out := filepath.Join(tmp, fmt.Sprintf("%s%d", format, attempt))
				b, err := exec.Command(bin, "--json", "export", src, "--partition-by", "bucket", "--format", format, "--out", out).Output()
				if err != nil {
					t.Fatalf("%v: %s", err, b)
				}
				var rep struct {
					Rows    uint64   `json:"rows"`
					Files   []string `json:"files"`
					PeakRSS int64    `json:"peak_rss_bytes"`
				}
				if err := json.Unmarshal(b, &rep); err != nil {
					t.Fatalf("%v: %s", err, b)
				}
				dirs, err := filepath.Glob(filepath.Join(out, "bucket=*"))
				if err != nil || len(dirs) != nonEmpty || len(rep.Files) != nonEmpty || rep.Rows != m.TotalEntries() {
					t.Fatalf("%d bucket directories and %d files for %d non-empty buckets, %d rows of %d (%v)", len(dirs), len(rep.Files), nonEmpty, rep.Rows, m.TotalEntries(), err)
				}
				t.Logf("%s: %d rows in %d files, peak RSS %d MiB", format, rep.Rows, len(rep.Files), rep.PeakRSS>>20)
				os.RemoveAll(out)
				return rep.PeakRSS
			}, plan.FixedOverhead)
		})
	}
}
