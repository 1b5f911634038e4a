package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/writer"
)

func genPlanFixture(t *testing.T, spec fixtures.Spec) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	if _, err := fixtures.Generate(context.Background(), dir, spec, writer.Options{FileSize: 8 << 10}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPlanRecommendPeak40(t *testing.T) {
	out, code := runRoot(t, "plan", "--recommend", "--peak-width", "40")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	out = strings.Join(strings.Fields(out), " ") // undo the paragraph's wrapping
	for _, want := range []string{
		"recommended bucket count for a peak of 40 workers", "): 160 buckets",
		"Bucket count: 160.", "4 x 40 = 160", "divides evenly by every planned width (1, 2, 4, 5, 8, 10, 20, 40)",
		"same number of buckets", "240", "Bookkeeping",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, code = runRoot(t, "--json", "plan", "--recommend", "--peak-width", "40")
	if code != exitOK {
		t.Fatalf("json exit %d: %s", code, out)
	}
	var rep struct {
		Recommendation plan.Recommendation `json:"recommendation"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.Recommendation.Recommended.Buckets
	for _, w := range []int{4, 8, 10, 20, 40} {
		if c%w != 0 || c < 160 {
			t.Errorf("count %d: not divisible by %d or no 4x headroom", c, w)
		}
	}
}

func TestPlanUsageAndWarnings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plan", "--recommend"}, exitUsage, "--peak-width"},
		{[]string{"plan"}, exitUsage, ""},
		{[]string{"plan", "--recommend", "--peak-width", "20000"}, exitUsage, "above the limit"},
		{[]string{"plan", "--recommend", "--peak-width", "10000"}, exitOK, "above 32768"},
	} {
		out, code := runRoot(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s", tc.args, code, tc.code, tc.want, out)
		}
	}
}

func TestPlanWidths(t *testing.T) {
	dir := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 300})
	out, code := runRoot(t, "plan", dir, "--widths", "2,4,12")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{
		"width 2: feasible", "w0..w1         4 buckets each, buckets 0..7",
		"w0..w3         2 buckets each, buckets 0..7",
		"width 12: NOT feasible", "at most 8 workers can own state", "idle: 2, 5, 8, 11",
		"`rebucket rewrite " + dir + " --buckets 48 --out " + dir + "-48`", "rebucket import", "rebucket split",
		"per-worker load at width 12", "bucket sizes", "█",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, code = runRoot(t, "--json", "plan", dir, "--widths", "3,12")
	var rep planReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil {
		t.Fatalf("exit %d %v: %s", code, err, out)
	}
	if len(rep.Widths) != 2 || !rep.Widths[0].Feasible || rep.Widths[1].Feasible || len(rep.Widths[1].Idle) != 4 {
		t.Errorf("json widths: %+v", rep.Widths)
	}
}

func TestPlanRewriteAndTopKeys(t *testing.T) {
	dir := genPlanFixture(t, fixtures.Spec{Buckets: 16, Width: 2, Keys: 300, SubKeys: 50, Skew: fixtures.Zipf})
	out, code := runRoot(t, "plan", dir, "--buckets", "64", "--memory", "64MiB", "--top-keys", "3")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{
		"rewrite 16 mod -> 64 mod: split", "measured on this machine", "time         about",
		"heaviest keys by bytes", "user-000000000",
		"more buckets will not spread a single key",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectTopKeys(t *testing.T) {
	dir := genPlanFixture(t, fixtures.Spec{Buckets: 16, Width: 2, Keys: 300, SubKeys: 50, Skew: fixtures.Zipf})
	out, code := runRoot(t, "inspect", dir, "--top-keys", "2")
	if code != exitOK || !strings.Contains(out, "heaviest keys by bytes") || !strings.Contains(out, "user-000000000") ||
		!strings.Contains(out, "more buckets will not spread a single key") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	out, code = runRoot(t, "--json", "inspect", dir, "--top-keys", "2")
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || rep.HotKeys == nil || len(rep.HotKeys.Top) != 2 {
		t.Errorf("json: exit %d %v %+v", code, err, rep.HotKeys)
	}
	if _, code := runRoot(t, "inspect", dir, "--top-keys", "-1"); code != exitUsage {
		t.Errorf("--top-keys -1: exit %d", code)
	}
}
