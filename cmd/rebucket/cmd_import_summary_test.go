package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// The import summary states rows declared and rows read (human and
// --json), and with --dedupe the rows dropped, even none; --memory has a
// floor.
func TestImportSummaryRows(t *testing.T) {
	type row struct {
		Step  string `parquet:"step"`
		State string `parquet:"state"`
		Key   []byte `parquet:"key"`
		Value []byte `parquet:"value"`
	}
	dir := t.TempDir()
	ds := filepath.Join(dir, "d.parquet")
	var rows []row
	for i := 0; i < 40; i++ {
		rows = append(rows, row{"s", "v", []byte{byte(i % 30)}, []byte{1}})
	}
	f, err := os.Create(ds)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[row](f)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// A dataset directory with a file the _ convention leaves out.
	dsDir := filepath.Join(dir, "dsdir")
	if err := os.MkdirAll(dsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(ds)
	os.WriteFile(filepath.Join(dsDir, "part-0.parquet"), data, 0o644)
	os.WriteFile(filepath.Join(dsDir, "_SUCCESS"), nil, 0o644)
	// No export metadata: the states table is given, no per-worker state said.
	states := filepath.Join(dir, "states.json")
	os.WriteFile(states, []byte(`[{"id":1,"step":"s","name":"v","kind":"value"}]`), 0o644)
	known := []string{"--states", states, "--no-worker-state"}
	out, code := runRoot(t, append([]string{"import", dsDir, "--buckets", "4", "--out", filepath.Join(dir, "a"), "--dedupe", "first"}, known...)...)
	if code != 0 || !strings.Contains(out, "ignored (names starting with _ or .): "+filepath.Join(dsDir, "_SUCCESS")) {
		t.Fatalf("exit %d: %s", code, out)
	}
	if code != 0 || !strings.Contains(out, "rows: 40 declared by 1 input files, 40 read") || !strings.Contains(out, "duplicates: 10 rows dropped (--dedupe first)") {
		t.Fatalf("exit %d: %s", code, out)
	}
	stdout, _, code := runCLI(t, append([]string{"--json", "import", ds, "--buckets", "4", "--out", filepath.Join(dir, "b"), "--dedupe", "last"}, known...)...)
	var rep struct {
		Declared *uint64 `json:"rows_declared"`
		Read     *uint64 `json:"rows_read"`
		Dups     uint64  `json:"duplicates"`
		Entries  uint64  `json:"entries"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s", code, err, stdout)
	}
	if rep.Declared == nil || rep.Read == nil || *rep.Declared != 40 || *rep.Read != 40 || rep.Dups != 10 || rep.Entries != 30 {
		t.Fatalf("--json: %s", stdout)
	}
	if out, code := runRoot(t, "import", ds, "--buckets", "4", "--out", filepath.Join(dir, "c"), "--memory", "1"); code != exitUsage || !strings.Contains(out, "floor") {
		t.Fatalf("--memory 1: exit %d: %s", code, out)
	}
}
