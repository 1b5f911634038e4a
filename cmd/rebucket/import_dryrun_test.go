package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
)

// import --dry-run (issue 15 item 6): the checks and the plan, nothing
// written, exit 0 when the real run would start, else the refusal's code.
func TestImportDryRunCLI(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 4, Width: 2, Keys: 200})
	dir := t.TempDir()
	ds := filepath.Join(dir, "x.parquet")
	if out, code := runRoot(t, "--quiet", "export", src, "--out", ds); code != exitOK {
		t.Fatalf("export: %d %s", code, out)
	}
	out := filepath.Join(dir, "new")
	msg, code := runRoot(t, "import", ds, "--buckets", "8", "--out", out, "--dry-run")
	if code != exitOK || !strings.Contains(msg, "plan: import") || !strings.Contains(msg, "nothing was written") {
		t.Fatalf("exit %d: %s", code, msg)
	}
	stdout, _, code := runCLI(t, "--json", "import", ds, "--buckets", "8", "--out", out, "--dry-run")
	var rep struct {
		DryRun     bool `json:"dry_run"`
		WouldStart bool `json:"would_start"`
		Plan       struct {
			RowsDeclared uint64   `json:"rows_declared"`
			WorkerStates []string `json:"worker_states"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != exitOK || !rep.DryRun || !rep.WouldStart || rep.Plan.RowsDeclared != 1200 || len(rep.Plan.WorkerStates) != 2 {
		t.Fatalf("exit %d, %v: %s", code, err, stdout)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a dry run wrote its output")
	}
	// Into the source snapshot: the real run's refusal and code.
	if msg, code := runRoot(t, "import", ds, "--buckets", "8", "--out", src, "--dry-run"); code != exitRefused {
		t.Fatalf("dry run into an existing snapshot: exit %d: %s", code, msg)
	}
}
