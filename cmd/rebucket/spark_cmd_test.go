package main

import (
	"encoding/json"
	"fmt"
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

// locate on a transformWithState checkpoint: the grouping key's partition
// and its rows in every column family, checked against Spark's statestore
// reader (expected_state.jsonl): the value state, the list's elements in
// order, one map row per user key, the timer.
func TestSparkLocateTWS(t *testing.T) {
	base := "../../engine/spark/testdata/interop/tws"
	raw, err := os.ReadFile(filepath.Join(base, "expected_state.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		partition       int
		count           map[string]any
		list            []any
		mapRows, timers int
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r struct {
			Key       map[string]any `json:"key"`
			Store     string         `json:"store"`
			Partition int            `json:"partition_id"`
			Value     map[string]any `json:"value"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Key["k"] != "k3" {
			continue
		}
		want.partition = r.Partition
		switch r.Store {
		case "count":
			want.count = r.Value["value"].(map[string]any)
		case "recent":
			want.list = append(want.list, r.Value["list_element"])
		case "seen":
			want.mapRows++
		case "$timers":
			want.timers++
		}
	}
	out, code := runRoot(t, "--json", "locate", filepath.Join(base, "checkpoint"), "k=k3")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var loc sparkLocateReport
	if err := json.Unmarshal([]byte(out), &loc); err != nil {
		t.Fatal(err, out)
	}
	if len(loc.Stores) != 1 || loc.Stores[0].Partition != want.partition {
		t.Fatalf("%+v, want partition %d", loc, want.partition)
	}
	got := map[string][][]any{}
	for _, b := range loc.Stores[0].Rows {
		var r struct {
			Family string         `json:"family"`
			Key    map[string]any `json:"key"`
			Values []any          `json:"values"`
		}
		if err := json.Unmarshal(b, &r); err != nil || r.Key["k"] != "k3" {
			t.Fatalf("row %s: %v", b, err)
		}
		got[r.Family] = append(got[r.Family], r.Values)
	}
	if len(got["count"]) != 1 || fmt.Sprint(got["count"][0][0]) != fmt.Sprint(want.count) {
		t.Errorf("count: %v, Spark %v", got["count"], want.count)
	}
	if len(got["recent"]) != 1 || fmt.Sprint(got["recent"][0]) != fmt.Sprint(want.list) {
		t.Errorf("list: %v, Spark %v", got["recent"], want.list)
	}
	if len(got["seen"]) != want.mapRows || len(got["$procTimers_keyToTimestamp"]) != want.timers || want.timers == 0 {
		t.Errorf("map rows %d (Spark %d), timers %d (Spark %d)", len(got["seen"]), want.mapRows, len(got["$procTimers_keyToTimestamp"]), want.timers)
	}
}
