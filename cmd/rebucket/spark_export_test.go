package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSparkExportTyped: export of a Spark checkpoint to Parquet and Arrow
// writes a directory of one table per operator and store, with the
// manifest; the source is untouched and nothing is left beside the output.
func TestSparkExportTyped(t *testing.T) {
	src := sparkSample(t, "join")
	before := dirHash(t, src)
	dir := t.TempDir()
	for _, c := range []struct {
		out  string
		args []string
		ext  string
	}{
		{filepath.Join(dir, "state"), nil, ".parquet"},
		{filepath.Join(dir, "state-arrow"), []string{"--format", "arrow"}, ".arrow"},
		{filepath.Join(dir, "state.arrow"), nil, ".arrow"},
		{filepath.Join(dir, "snappy.parquet"), []string{"--compression", "snappy"}, ".parquet"},
	} {
		out, code := runRoot(t, append([]string{"--json", "export", src, "--out", c.out}, c.args...)...)
		if code != 0 {
			t.Fatalf("export %s: exit %d\n%s", c.out, code, out)
		}
		var sum struct {
			Rows  uint64 `json:"rows"`
			Files []struct {
				Name  string `json:"file"`
				Store string `json:"store"`
				Rows  uint64 `json:"rows"`
			} `json:"files"`
		}
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			t.Fatal(err, out)
		}
		var names []string
		var rows uint64
		for _, f := range sum.Files {
			names = append(names, f.Name)
			rows += f.Rows
			if fi, err := os.Stat(filepath.Join(c.out, f.Name)); err != nil || fi.Size() == 0 {
				t.Fatalf("%s: %v", f.Name, err)
			}
		}
		want := []string{"0-left-keyToNumValues", "0-left-keyWithIndexToValue", "0-right-keyToNumValues", "0-right-keyWithIndexToValue"}
		for i := range want {
			want[i] += c.ext
		}
		if !slices.Equal(names, want) || rows != sum.Rows || sum.Rows != 340 {
			t.Fatalf("%s: files %v with %d rows (summary %d), want %v with 340", c.out, names, rows, sum.Rows, want)
		}
		if _, err := os.Stat(filepath.Join(c.out, "_rebucket_export.json")); err != nil {
			t.Fatal(err)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("left behind: %s", e.Name())
		}
	}
	if dirHash(t, src) != before {
		t.Fatal("the source checkpoint changed")
	}
}

// TestSparkExportRefusals: what the typed export refuses, and what --force
// replaces (only an earlier export).
func TestSparkExportRefusals(t *testing.T) {
	src := sparkSample(t, "agg_str")
	dir := t.TempDir()
	prev := filepath.Join(dir, "prev")
	if out, code := runRoot(t, "export", src, "--out", prev); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, out)
	}
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o755)
	os.WriteFile(filepath.Join(other, "keep.txt"), []byte("mine"), 0o644)
	file := filepath.Join(dir, "file.parquet")
	os.WriteFile(file, []byte("mine"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export", src, "--out", prev}, exitRefused, "--force"},
		{[]string{"export", src, "--out", other, "--force"}, exitRefused, "no _rebucket_export.json"},
		{[]string{"export", src, "--out", file, "--force"}, exitRefused, "not a directory"},
		{[]string{"export", src, "--out", filepath.Join(src, "x")}, exitRefused, ""},
		{[]string{"export", src, "--out", filepath.Join(dir, "x.arrow"), "--format", "parquet"}, exitUsage, "extension"},
		{[]string{"export", src, "--out", filepath.Join(dir, "x.jsonl"), "--compression", "zstd"}, exitUsage, "--compression"},
		{[]string{"export", src, "--out", filepath.Join(dir, "y.arrow"), "--compression", "snappy"}, exitUsage, "zstd or none"},
		{[]string{"export", src, "--out", "-"}, exitUsage, "standard output"},
		{[]string{"export", src, "--out", filepath.Join(dir, "z"), "--state", "0/default"}, exitUsage, "--state"},
		{[]string{"export", src, "--out", filepath.Join(dir, "z"), "--parallelism", "4"}, exitUsage, "--parallelism"},
	} {
		out, code := runRoot(t, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%q: exit %d (want %d), output lacks %q:\n%s", c.args, code, c.code, c.want, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(other, "keep.txt")); string(b) != "mine" {
		t.Fatal("--force touched a directory no export wrote")
	}
	if b, _ := os.ReadFile(file); string(b) != "mine" {
		t.Fatal("--force touched a file")
	}
	for _, n := range []string{"x.arrow", "y.arrow", "z"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			t.Fatalf("a refused export wrote %s", n)
		}
	}
	// --force replaces the earlier export, whole.
	os.WriteFile(filepath.Join(prev, "0-stale.parquet"), []byte("x"), 0o644)
	if out, code := runRoot(t, "export", src, "--out", prev, "--force", "--format", "arrow"); code != 0 {
		t.Fatalf("export --force: exit %d\n%s", code, out)
	}
	ents, _ := os.ReadDir(prev)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"0-default.arrow", "_rebucket_export.json"}) {
		t.Fatalf("after --force: %v", names)
	}
	// JSON Lines still go to one file.
	jl := filepath.Join(dir, "rows.jsonl")
	if out, code := runRoot(t, "export", src, "--out", jl); code != 0 || !strings.Contains(out, "(jsonl)") {
		t.Fatalf("jsonl export: exit %d\n%s", code, out)
	}
	if fi, err := os.Stat(jl); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("rows.jsonl: %v", err)
	}
}
