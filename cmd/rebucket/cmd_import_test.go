package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
)

// TestImportPeakMemory imports, in the built binary, Parquet and Arrow
// exports of a snapshot several times larger than --memory and checks that
// the sort spilled and that the process's peak resident memory stayed
// within --memory plus plan.FixedOverhead. Before the import set a soft
// memory limit and stopped making garbage per row, the collector let the
// heap grow to about twice the sort's live buffers: 137 MiB here for a
// 32 MiB budget (190 MiB for 64 MiB on a larger input); now about 100.
func TestImportPeakMemory(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "snap")
	if out, err := exec.Command(bin, "generate", "--out", src, "--entries", "2000000", "--buckets", "128", "-q").CombinedOutput(); err != nil {
		t.Fatalf("generate: %v: %s", err, out)
	}
	s, err := reader.Open(src, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const mem = 32 << 20
	if s.Manifest().TotalBytes() < 4*mem {
		t.Fatalf("source of %d bytes is not 4x --memory", s.Manifest().TotalBytes())
	}
	for _, format := range []string{"parquet", "arrow"} {
		t.Run(format, func(t *testing.T) {
			ds := filepath.Join(dir, "export."+format)
			if out, err := exec.Command(bin, "export", src, "--format", format, "--out", ds, "-q").CombinedOutput(); err != nil {
				t.Fatalf("export: %v: %s", err, out)
			}
			withinBound(t, func(attempt int) int64 {
				imp := filepath.Join(dir, fmt.Sprintf("imp-%s-%d", format, attempt))
				out, err := exec.Command(bin, "--json", "import", ds, "--buckets", "100", "--out", imp,
					"--memory", "32MiB", "--no-verify", "--tmp", dir).Output()
				if err != nil {
					t.Fatalf("import: %v: %s", err, out)
				}
				var rep struct {
					Rows uint64 `json:"rows"`
					Sort struct {
						Runs int `json:"spilled_runs"`
					} `json:"sort"`
					PeakRSS int64 `json:"peak_rss_bytes"`
				}
				if err := json.Unmarshal(out, &rep); err != nil || rep.Sort.Runs < 2 || rep.Rows != s.Manifest().TotalEntries() {
					t.Fatalf("rows %d, spilled runs %d (%v): %s", rep.Rows, rep.Sort.Runs, err, out)
				}
				t.Logf("peak RSS %d MiB with --memory 32MiB, %d spilled runs", rep.PeakRSS>>20, rep.Sort.Runs)
				return rep.PeakRSS
			}, int64(mem+plan.FixedOverhead))
		})
	}
}
