package main

import (
	"bytes"
	"fmt"
	"github.com/rebucket/rebucket/fixtures"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/internal/progress"
)

// A bar shows its phase and counts in the phase's unit: workers are not
// bytes, and bytes are IEC (MiB), as in every report.
func TestBarUnits(t *testing.T) {
	for _, tc := range []struct {
		unit     progress.Unit
		total, n int64
		want     []string
		not      []string
	}{
		{progress.Workers, 5, 1, []string{"building worker stores", "1/5", "workers"}, []string{" B", "kB"}},
		{progress.Rows, 1000, 250, []string{"building worker stores", "250/1000", "rows"}, []string{" B"}},
		{progress.Bytes, 10 << 20, 3 << 20, []string{"building worker stores", "MiB"}, []string{" MB", "kB"}},
	} {
		var buf bytes.Buffer
		b := &barReporter{w: &buf, eager: true}
		progress.StartUnit(b, tc.total, "building worker stores", tc.unit)
		b.Add(tc.n)
		got := b.bar.String() + buf.String()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: bar lacks %q: %q", tc.unit, w, got)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(b.bar.String(), w) {
				t.Errorf("%s: bar has %q: %q", tc.unit, w, b.bar.String())
			}
		}
		b.Finish()
	}
}

// recordProgress makes every command of the test report to a Recorder.
func recordProgress(t *testing.T) *progress.Recorder {
	rec := &progress.Recorder{}
	testProgress = rec
	t.Cleanup(func() { testProgress = nil })
	return rec
}

func phaseNames(rec *progress.Recorder) []string {
	var names []string
	for _, p := range rec.Phases() {
		names = append(names, fmt.Sprintf("%s (%s)", p.What, p.Unit))
	}
	return names
}

// Every phase of load and of a rewrite has a labelled bar with a total:
// load's read-back and a rewrite's self-check included, workers counted as
// workers.
func TestEveryPhaseHasABar(t *testing.T) {
	dir := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 300})
	rec := recordProgress(t)
	if out, errOut, code := runCLI(t, "load", dir, "--width", "4", "--into", filepath.Join(t.TempDir(), "stores")); code != exitOK {
		t.Fatalf("load: exit %d\n%s%s", code, out, errOut)
	}
	want := []string{"load: build the worker stores (workers)", "load: read the stores back (workers)"}
	if got := phaseNames(rec); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("load phases %q, want %q", got, want)
	}
	for _, p := range rec.Phases() {
		if p.Total != 4 || p.Done != 4 || !p.Finished {
			t.Errorf("load phase %+v: want 4 of 4 workers", p)
		}
	}

	rec = recordProgress(t)
	if out, errOut, code := runCLI(t, "rewrite", dir, "--buckets", "6", "--mapping", "range", "--out", filepath.Join(t.TempDir(), "out")); code != exitOK {
		t.Fatalf("rewrite: exit %d\n%s%s", code, out, errOut)
	}
	want = []string{"shuffle: read and sort (bytes)", "shuffle: merge and write (bytes)", "self-check: read the output back (bytes)"}
	if got := phaseNames(rec); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("rewrite phases %q, want %q", got, want)
	}
	for _, p := range rec.Phases() {
		if p.Total <= 0 || p.Done != p.Total {
			t.Errorf("rewrite phase %+v: want a total, reached", p)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"split", dir, "--out", filepath.Join(t.TempDir(), "a"), "--out", filepath.Join(t.TempDir(), "b"), "--by", "buckets=0-3"}, "split: read and write (bytes)"},
		{[]string{"verify", dir, "--against", dir}, "verify --against: fingerprint both snapshots (bytes)"},
		{[]string{"export", dir, "--out", filepath.Join(t.TempDir(), "x.parquet")}, "export: read and write (bytes)"},
	} {
		rec = recordProgress(t)
		if out, errOut, code := runCLI(t, tc.args...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", tc.args, code, out, errOut)
		}
		if got := phaseNames(rec); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%v: phases %q, want %q", tc.args, got, tc.want)
		}
	}
}
