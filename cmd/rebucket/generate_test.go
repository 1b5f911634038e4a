package main

import (
	"encoding/json"
	"github.com/rebucket/rebucket/fixtures"
	"path/filepath"
	"strings"
	"testing"
)

// generate --entries N gives about N entries under every skew (zipf gave
// about 58% of N).
func TestGenerateHonoursEntries(t *testing.T) {
	for _, skew := range []string{"uniform", "zipf"} {
		for _, n := range []int{5000, 40000} {
			out, errOut, code := runCLI(t, "--json", "generate", "--out", filepath.Join(t.TempDir(), "s"), "--entries", itoa(n), "--skew", skew)
			var rep struct {
				Entries int `json:"entries"`
			}
			if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil {
				t.Fatalf("%s %d: exit %d %v: %s%s", skew, n, code, err, out, errOut)
			}
			if d := float64(rep.Entries-n) / float64(n); d < -0.02 || d > 0.02 {
				t.Errorf("--entries %d --skew %s: %d entries", n, skew, rep.Entries)
			}
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// An export that selects no rows says why, instead of a silent empty file.
func TestExportOfNothingWarns(t *testing.T) {
	dir := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 100})
	out, errOut, code := runCLI(t, "export", dir, "--worker", "3/400", "--out", filepath.Join(t.TempDir(), "w.parquet"))
	if code != exitOK || !strings.Contains(errOut, "warning: 0 rows written: worker 3 of 400 owns no bucket") {
		t.Errorf("exit %d:\n%s%s", code, out, errOut)
	}
	out, errOut, _ = runCLI(t, "--json", "export", dir, "--worker", "3/400", "--out", filepath.Join(t.TempDir(), "w.parquet"))
	var rep struct {
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Warnings) != 1 {
		t.Errorf("--json warnings %v (%v): %s%s", rep.Warnings, err, out, errOut)
	}
	if out, errOut, _ := runCLI(t, "export", dir, "--worker", "3/4", "--out", filepath.Join(t.TempDir(), "w.parquet")); strings.Contains(errOut, "warning") {
		t.Errorf("a worker that owns buckets warned:\n%s%s", out, errOut)
	}
}
