package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sparkSample is a real checkpoint written by pyspark 4.3.0 (2 state
// partitions, HDFS-backed state store; see engine/spark/testdata).
func sparkSample(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "engine", "spark", "testdata", "real", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p, "offsets")); err != nil {
		t.Fatalf("test checkpoint %s: %v", name, err)
	}
	return p
}

func TestSparkCommandsDetectAndRewrite(t *testing.T) {
	for _, name := range []string{"agg_str", "agg_str_int", "join", "two_ops"} {
		t.Run(name, func(t *testing.T) {
			src := sparkSample(t, name)
			before := dirHash(t, src)
			out, code := runRoot(t, "inspect", src)
			if code != 0 || !strings.Contains(out, "2 state partitions") {
				t.Fatalf("inspect: exit %d\n%s", code, out)
			}
			out, code = runRoot(t, "verify", src)
			if code != 0 || !strings.Contains(out, "0 findings") {
				t.Fatalf("verify: exit %d\n%s", code, out)
			}
			for _, m := range []string{"8", "3"} {
				dst := filepath.Join(t.TempDir(), "ckpt-"+m)
				out, code = runRoot(t, "rewrite", src, "--buckets", m, "--out", dst)
				if code != 0 || !strings.Contains(out, "proved before publishing") {
					t.Fatalf("rewrite to %s: exit %d\n%s", m, code, out)
				}
				out, code = runRoot(t, "verify", dst, "--against", src)
				if code != 0 || !strings.Contains(out, "equal") {
					t.Fatalf("verify --against after rewrite to %s: exit %d\n%s", m, code, out)
				}
				out, code = runRoot(t, "--json", "inspect", dst)
				if code != 0 || !strings.Contains(out, `"partitions": `+m) {
					t.Fatalf("inspect rewritten %s: exit %d\n%s", m, code, out)
				}
			}
			if dirHash(t, src) != before {
				t.Fatal("the source checkpoint changed")
			}
		})
	}
}

func TestSparkLocateExportRefusals(t *testing.T) {
	src := sparkSample(t, "agg_str_int")
	dir := t.TempDir()
	jl := filepath.Join(dir, "rows.jsonl")
	if out, code := runRoot(t, "export", src, "--out", jl); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, out)
	}
	data, err := os.ReadFile(jl)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var first struct {
		Key       map[string]any `json:"key"`
		Partition int            `json:"partition"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Key["k"] == nil {
		t.Fatalf("export row: %v %s", err, lines[0])
	}
	key := "k=" + first.Key["k"].(string) + ",n=" + strings.TrimSuffix(strings.TrimSuffix(jsonNum(first.Key["n"]), ".0"), "")
	out, code := runRoot(t, "--json", "locate", src, key)
	if code != 0 {
		t.Fatalf("locate %s: exit %d\n%s", key, code, out)
	}
	var loc sparkLocateReport
	if err := json.Unmarshal([]byte(out), &loc); err != nil {
		t.Fatal(err, out)
	}
	if len(loc.Stores) != 1 || loc.Stores[0].Partition != first.Partition || len(loc.Stores[0].Rows) != 1 {
		t.Fatalf("locate %s: %+v, want partition %d and one row", key, loc, first.Partition)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"rewrite", src, "--buckets", "8", "--out", filepath.Join(src, "x")}, exitRefused, ""},
		{[]string{"rewrite", src, "--buckets", "8", "--out", filepath.Join(dir, "a"), "--mapping", "range"}, exitUsage, "--mapping does not apply"},
		{[]string{"inspect", dir, "--engine", "spark"}, exitUsage, "not a Spark checkpoint"},
		{[]string{"rewrite", "../../examples/sample", "--buckets", "16", "--out", filepath.Join(dir, "b"), "--skip-uncommitted"}, exitUsage, "--skip-uncommitted applies to Spark"},
	} {
		out, code := runRoot(t, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%q: exit %d (want %d), output lacks %q:\n%s", c.args, code, c.code, c.want, out)
		}
	}
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
