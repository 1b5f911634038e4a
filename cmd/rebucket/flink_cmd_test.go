package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// flinkSample is a real canonical savepoint of the probe job written by
// Flink 2.3.0 (max parallelism 8, parallelism 2; see engine/flink/testdata).
func flinkSample(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "engine", "flink", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p, "_metadata")); err != nil {
		t.Fatalf("test savepoint %s: %v", name, err)
	}
	return p
}

func TestFlinkCommandsDetectAndRewrite(t *testing.T) {
	for _, name := range []string{"probe-heap-files", "probe-rocksdb-inline", "probe-heap-files-snappy"} {
		t.Run(name, func(t *testing.T) {
			src := flinkSample(t, name)
			before := dirHash(t, src)

			out, code := runRoot(t, "inspect", src)
			if code != 0 || !strings.Contains(out, "max parallelism 8") || !strings.Contains(out, "str-counter") || !strings.Contains(out, "1,000 keyed entries") {
				t.Fatalf("inspect: exit %d\n%s", code, out)
			}
			out, code = runRoot(t, "verify", src, "--width", "2")
			if code != 0 || !strings.Contains(out, "0 findings") {
				t.Fatalf("verify --width 2: exit %d\n%s", code, out)
			}
			out, code = runRoot(t, "verify", src, "--width", "40")
			if code != exitFindings || !strings.Contains(out, "can NOT restore") || !strings.Contains(out, "--buckets") {
				t.Fatalf("verify --width 40 of max parallelism 8: exit %d\n%s", code, out)
			}

			for _, m := range []string{"128", "256", "5"} {
				dst := filepath.Join(t.TempDir(), "sp-"+m)
				out, code = runRoot(t, "rewrite", src, "--buckets", m, "--out", dst)
				if code != 0 {
					t.Fatalf("rewrite to %s: exit %d\n%s", m, code, out)
				}
				out, code = runRoot(t, "verify", dst, "--against", src)
				if code != 0 || !strings.Contains(out, "equal") {
					t.Fatalf("verify --against after rewrite to %s: exit %d\n%s", m, code, out)
				}
				out, code = runRoot(t, "--json", "verify", dst, "--width", "3")
				if code != 0 || !strings.Contains(out, `"max_parallelism":`+m) {
					t.Fatalf("verify rewritten %s: exit %d\n%s", m, code, out)
				}
			}
			if dirHash(t, src) != before {
				t.Fatal("the source savepoint changed")
			}
		})
	}
}

func TestFlinkRewriteRefusals(t *testing.T) {
	src := flinkSample(t, "probe-heap-files")
	before := dirHash(t, src)
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"native savepoint", []string{"rewrite", flinkSample(t, "probe-heap-native"), "--buckets", "128", "--out", filepath.Join(dir, "a")}, exitUsage, "--type canonical"},
		{"rocksdb native", []string{"rewrite", flinkSample(t, "probe-rocksdb-native"), "--buckets", "128", "--out", filepath.Join(dir, "b")}, exitUsage, "canonical"},
		{"max parallelism too large", []string{"rewrite", src, "--buckets", "40000", "--out", filepath.Join(dir, "c")}, exitUsage, "1..32768"},
		{"native-only flag", []string{"rewrite", src, "--buckets", "128", "--out", filepath.Join(dir, "d"), "--mapping", "range"}, exitUsage, "--mapping does not apply"},
		{"force", []string{"rewrite", src, "--buckets", "128", "--out", filepath.Join(dir, "e"), "--force"}, exitUsage, "--force"},
		{"inside the source", []string{"rewrite", src, "--buckets", "128", "--out", filepath.Join(src, "new")}, exitRefused, "inside"},
		{"engine forced on a directory without _metadata", []string{"inspect", dir, "--engine", "flink"}, exitUsage, "not a Flink savepoint"},
		{"key type on a native snapshot", []string{"locate", "../../examples/sample", "k", "--key-type", "string"}, exitUsage, "--key-type applies to Flink"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := runRoot(t, c.args...)
			if code != c.code || !strings.Contains(out, c.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s", code, c.code, c.want, out)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("refused runs left %d entries in the target's parent", len(entries))
	}
	if dirHash(t, src) != before {
		t.Fatal("the source savepoint changed")
	}
}

func TestFlinkLocateExportPlan(t *testing.T) {
	src := flinkSample(t, "probe-heap-files")
	out, code := runRoot(t, "--json", "locate", src, "k42")
	if code != 0 {
		t.Fatalf("locate: exit %d\n%s", code, out)
	}
	var loc flinkLocateReport
	if err := json.Unmarshal([]byte(out), &loc); err != nil {
		t.Fatal(err, out)
	}
	// "k42": Java hashCode 104489, key group 7 of 8 (research §6, checked
	// against Flink's KeyGroupRangeAssignment), subtask 1 of 2; count and
	// its event timer.
	if len(loc.Operators) != 1 || loc.Operators[0].HashCode != 104489 || loc.Operators[0].KeyGroup != 7 ||
		loc.Operators[0].Subtask != 1 || len(loc.Operators[0].Entries) != 2 {
		t.Fatalf("locate k42: %+v", loc)
	}

	dir := t.TempDir()
	jl := filepath.Join(dir, "sp.jsonl")
	if out, code := runRoot(t, "export", src, "--out", jl); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, out)
	}
	data, err := os.ReadFile(jl)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1000 {
		t.Fatalf("export: %d rows, want 1000", len(lines))
	}
	counts := map[string]int{}
	for _, l := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if len(r) != 16 {
			t.Fatalf("row with %d keys, want the same 16 on every row: %s", len(r), l)
		}
		counts[r["state"].(string)]++
		if r["state"] == "count" && (r["value_json"] != "1" || r["key_string"] == nil) {
			t.Fatalf("count row not decoded: %s", l)
		}
		if r["state"] == "tags" && (r["user_key_json"] == nil || r["key_int64"] == nil) {
			t.Fatalf("tags row not decoded: %s", l)
		}
	}
	if counts["count"] != 200 || counts["tags"] != 200 || counts["events"] != 200 || counts["_timer_state/event_user-timers"] != 400 {
		t.Fatalf("rows per state: %v", counts)
	}
	if out, code := runRoot(t, "export", src, "--out", jl); code != exitRefused {
		t.Fatalf("export onto an existing file without --force: exit %d\n%s", code, out)
	}
	if out, code := runRoot(t, "export", src, "--out", filepath.Join(src, "x.parquet")); code != exitRefused {
		t.Fatalf("export into the savepoint: exit %d\n%s", code, out)
	}

	out, code = runRoot(t, "plan", src, "--widths", "4,40")
	if code != 0 || !strings.Contains(out, "parallelism 4: feasible") || !strings.Contains(out, "parallelism 40: NOT feasible") {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
}
