package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
)

// Exit codes of what export refuses up front (issue 14, low items): a row
// group size that would exceed Parquet's 32767 row groups in a file was
// found after writing them (exit 4), and --out under a regular file was a
// stat failure (exit 4) where rewrite gives 2. Both are exit 2 now, before
// anything is written.
func TestExportRefusalsExitUsage(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 4, Width: 2, Keys: 9000, SubKeys: 6})
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", src, "--out", filepath.Join(dir, "x.parquet"), "--row-group-size", "1"}, "--row-group-size"},
		{[]string{"export", src, "--out", filepath.Join(file, "x.parquet")}, "not a directory"},
		{[]string{"export", src, "--out", filepath.Join(file, "x"), "--partition-by", "bucket"}, "afile"},
	} {
		out, code := runRoot(t, c.args...)
		if code != exitUsage || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want %d and %q: %s", c.args, code, exitUsage, c.want, out)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("the refused exports wrote %d entries in %s", len(ents)-1, dir)
	}
}
