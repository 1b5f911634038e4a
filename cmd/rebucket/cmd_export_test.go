package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
)

// export and import through the command line: summaries, exit codes, and
// the route without the per-worker sibling file.
func TestExportImportCommands(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 2, Keys: 100})
	dir := t.TempDir()
	pq := filepath.Join(dir, "x.parquet")
	out, code := runRoot(t, "--json", "export", src, "--out", pq, "--state", "count/per_user", "--state", "sessions/open", "--bucket-range", "0-5")
	if code != exitOK {
		t.Fatalf("export: exit %d: %s", code, out)
	}
	var sum struct {
		Rows      uint64            `json:"rows"`
		StateRows map[string]uint64 `json:"state_rows"`
		Workers   string            `json:"worker_state_file"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Rows == 0 || len(sum.StateRows) != 2 || sum.StateRows["window/events"] != 0 || !strings.HasSuffix(sum.Workers, "x.workers.parquet") {
		t.Fatalf("summary %+v", sum)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"export", src, "--out", pq}, exitRefused},
		{[]string{"export", src, "--out", filepath.Join(dir, "y"), "--bucket-range", "5-2"}, exitUsage},
		{[]string{"export", src, "--out", filepath.Join(dir, "y"), "--worker", "2/2"}, exitUsage},
		{[]string{"export", src, "--out", filepath.Join(dir, "y"), "--format", "csv"}, exitUsage},
		{[]string{"export", src, "--out", filepath.Join(dir, "y"), "--state", "no/such"}, exitUsage},
		{[]string{"import", pq, "--buckets", "0", "--out", filepath.Join(dir, "z")}, exitUsage},
		{[]string{"import", filepath.Join(dir, "missing.parquet"), "--buckets", "4", "--out", filepath.Join(dir, "z")}, exitUsage},
	} {
		if out, code := runRoot(t, c.args...); code != c.code {
			t.Errorf("%v: exit %d, want %d: %s", c.args, code, c.code, out)
		}
	}
	out, code = runRoot(t, "import", pq, "--buckets", "3", "--out", filepath.Join(dir, "snap3"))
	if code != exitOK || !strings.Contains(out, "partial export") || !strings.Contains(out, "verified") {
		t.Fatalf("import: exit %d: %s", code, out)
	}
	// Without its per-worker sibling the export's data file is refused with
	// a hint, and accepted with --worker-state.
	lone := filepath.Join(dir, "lone")
	os.Mkdir(lone, 0o755)
	data, _ := os.ReadFile(pq)
	os.WriteFile(filepath.Join(lone, "x.parquet"), data, 0o644)
	out, code = runRoot(t, "import", filepath.Join(lone, "x.parquet"), "--buckets", "3", "--out", filepath.Join(dir, "snap4"))
	if code != exitUsage || !strings.Contains(out, "--worker-state") {
		t.Fatalf("import without sibling: exit %d: %s", code, out)
	}
	out, code = runRoot(t, "import", filepath.Join(lone, "x.parquet"), "--buckets", "3", "--out", filepath.Join(dir, "snap4"),
		"--worker-state", filepath.Join(dir, "x.workers.parquet"), "--width", "3")
	if code != exitOK || !strings.Contains(out, "source/offsets") {
		t.Fatalf("import --worker-state: exit %d: %s", code, out)
	}
}
