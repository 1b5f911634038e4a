package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rebucket/rebucket/fixtures"
)

// walkJSON calls fn for every key and value of a decoded JSON document.
func walkJSON(v any, path string, fn func(path, key string, v any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			fn(path, k, e)
			walkJSON(e, path+"."+k, fn)
		}
	case []any:
		for _, e := range x {
			walkJSON(e, path+"[]", fn)
		}
	}
}

// Every --json document speaks one dialect: durations in *_seconds (no
// *_ns), missing values null (never -1), timestamps in RFC 3339.
func TestJSONConventions(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 200})
	tmp := t.TempDir()
	for _, args := range [][]string{
		{"inspect", src},
		{"plan", src, "--widths", "12"},
		{"plan", src, "--buckets", "6"},
		{"load", src, "--width", "12", "--on-excess", "idle", "--into", filepath.Join(tmp, "stores")},
		{"verify", src, "--width", "12"},
		{"rewrite", src, "--buckets", "16", "--out", filepath.Join(tmp, "r")},
		{"export", src, "--out", filepath.Join(tmp, "x.parquet")},
	} {
		out, errOut, code := runCLI(t, append([]string{"--json"}, args...)...)
		if code != exitOK && code != exitFindings {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
			continue
		}
		docs := 0
		dec := json.NewDecoder(strings.NewReader(out))
		for dec.More() {
			var doc any
			if err := dec.Decode(&doc); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
			docs++
			walkJSON(doc, "", func(path, key string, v any) {
				where := path + "." + key
				if strings.HasSuffix(key, "_ns") {
					t.Errorf("%v: %s: a duration in nanoseconds (want *_seconds)", args, where)
				}
				if f, ok := v.(float64); ok && f == -1 {
					t.Errorf("%v: %s is -1 (want null for a missing value)", args, where)
				}
				if s, ok := v.(string); ok && (key == "created" || key == "time" || key == "started" || strings.HasSuffix(key, "_at")) {
					if _, err := time.Parse(time.RFC3339, s); err != nil {
						t.Errorf("%v: %s = %q is not RFC 3339", args, where, s)
					}
				}
			})
		}
		if docs == 0 {
			t.Errorf("%v: no JSON document: %s", args, out)
		}
	}
}
