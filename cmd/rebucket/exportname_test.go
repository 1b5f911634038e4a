package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
)

// Export names (issue 15 item 3): the format follows --out's extension when
// --format is not given, a contradiction is refused, an extension-less name
// gets the sibling the report names (and import finds it), and --out - is
// refused rather than writing a file named "-".
func TestExportNames(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 4, Width: 2, Keys: 200})
	magic := map[string][]byte{"arrow": []byte("ARROW1"), "parquet": []byte("PAR1"), "jsonl": []byte("{")}
	for _, c := range []struct{ name, format string }{
		{"x.arrow", "arrow"}, {"x.feather", "arrow"}, {"x.jsonl", "jsonl"}, {"x.json", "jsonl"}, {"x.parquet", "parquet"}, {"x.data", "parquet"},
	} {
		dir := t.TempDir()
		out := filepath.Join(dir, c.name)
		stdout, _, code := runCLI(t, "--quiet", "--json", "export", src, "--out", out)
		if code != exitOK {
			t.Fatalf("%s: exit %d", c.name, code)
		}
		var res struct {
			Format          string `json:"format"`
			WorkerStateFile string `json:"worker_state_file"`
		}
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if res.Format != c.format || !bytes.HasPrefix(b, magic[c.format]) {
			t.Errorf("--out %s: reported %s, file starts %q; want %s", c.name, res.Format, b[:min(8, len(b))], c.format)
		}
		if _, err := os.Stat(res.WorkerStateFile); err != nil {
			t.Errorf("--out %s: the reported per-worker file: %v", c.name, err)
		}
	}

	dir := t.TempDir()
	t.Chdir(dir) // where a file named "-" would land
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", src, "--format", "parquet", "--out", filepath.Join(dir, "x.arrow")}, "extension"},
		{[]string{"export", src, "--format", "jsonl", "--out", filepath.Join(dir, "x.parquet")}, "extension"},
		{[]string{"export", src, "--format", "jsonl", "--out", "-"}, "standard output"},
		{[]string{"export", src, "--out", "-"}, "standard output"},
	} {
		out, code := runRoot(t, c.args...)
		if code != exitUsage || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want %d and %q: %s", c.args, code, exitUsage, c.want, out)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("refused exports wrote %d entries", len(ents))
	}
	if _, err := os.Lstat("-"); err == nil {
		os.Remove("-")
		t.Fatal(`--out - wrote a file named "-"`)
	}

	// No extension: the sibling written is the one named, and import works.
	for _, format := range []string{"arrow", "parquet"} {
		out := filepath.Join(dir, "noext-"+format)
		stdout, _, code := runCLI(t, "--quiet", "--json", "export", src, "--format", format, "--out", out)
		if code != exitOK {
			t.Fatalf("export --format %s: exit %d", format, code)
		}
		var res struct {
			WorkerStateFile string `json:"worker_state_file"`
		}
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(res.WorkerStateFile); err != nil {
			t.Fatalf("--format %s --out %s: report names %s: %v", format, out, res.WorkerStateFile, err)
		}
		imported := filepath.Join(dir, "imported-"+format)
		if msg, code := runRoot(t, "--quiet", "import", out, "--buckets", "4", "--out", imported); code != exitOK {
			t.Fatalf("import %s: exit %d: %s", out, code, msg)
		}
		if msg, code := runRoot(t, "--quiet", "verify", imported, "--against", src); code != exitOK {
			t.Fatalf("verify: exit %d: %s", code, msg)
		}
	}
}
