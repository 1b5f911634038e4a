package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// --dry-run runs the checks and the plan and writes nothing (no target, no
// temporary directory, no lock file): exit 0 when the real run would start,
// the real run's refusal code otherwise.
func TestDryRunWritesNothing(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 200})
	out := t.TempDir()
	full := filepath.Join(out, "full")
	if err := os.Mkdir(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t1, t2 := filepath.Join(out, "t1"), filepath.Join(out, "t2")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"rewrite", src, "--buckets", "160", "--out", t1, "--dry-run"}, exitOK, "plan: split"},
		{[]string{"rewrite", src, "--buckets", "7", "--out", t1, "--dry-run"}, exitOK, "plan: shuffle"},
		{[]string{"rewrite", src, "--buckets", "160", "--out", full, "--dry-run"}, exitRefused, "would not start"},
		{[]string{"rewrite", src, "--buckets", "0", "--out", t1, "--dry-run"}, exitUsage, ""},
		{[]string{"rewrite", src, "--buckets", "16", "--out", t1, "--drop-state", "no/such", "--dry-run"}, exitUsage, ""},
		{[]string{"load", src, "--width", "4", "--into", t1, "--dry-run"}, exitOK, "8 buckets over 4 workers"},
		{[]string{"load", src, "--width", "4", "--into", full, "--dry-run"}, exitRefused, "another --into"},
		{[]string{"load", src, "--width", "40", "--into", t1, "--dry-run"}, exitRefused, "--on-excess cap"},
		{[]string{"split", src, "--out", t1, "--out", t2, "--by", "buckets=0-3", "--dry-run"}, exitOK, "would start"},
		{[]string{"split", src, "--out", t1, "--out", full, "--by", "buckets=0-3", "--dry-run"}, exitRefused, "would not start"},
		{[]string{"split", src, "--out", t1, "--out", t2, "--by", "buckets=0-9", "--dry-run"}, exitUsage, ""},
	} {
		before := listDir(t, out)
		stdout, stderr, code := runCLI(t, tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", tc.args, code, tc.code, stdout, stderr)
		}
		if !strings.Contains(stdout+stderr, tc.want) {
			t.Errorf("%v: output lacks %q:\n%s%s", tc.args, tc.want, stdout, stderr)
		}
		if after := listDir(t, out); !slices.Equal(before, after) {
			t.Errorf("%v: wrote %v (before %v)", tc.args, after, before)
		}
		if got := listDir(t, full); len(got) != 1 {
			t.Errorf("%v: touched the existing target: %v", tc.args, got)
		}
	}
	stdout, _, code := runCLI(t, "--json", "rewrite", src, "--buckets", "160", "--out", full, "--dry-run")
	var rep dryRunReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != exitRefused || !rep.DryRun || rep.WouldStart || rep.Refusal == "" || rep.Plan == nil {
		t.Errorf("--json dry run (exit %d, %v): %s", code, err, stdout)
	}
}
