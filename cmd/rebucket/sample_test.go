package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// samplePath is the snapshot the README's main job runs on.
const samplePath = "../../examples/sample"

// The bundled sample must stay what the README says it is: a valid
// snapshot of 8 buckets written by 4 workers, whose data files are exactly
// what `rebucket generate --keys 700 --buckets 8 --width 4 --spread --seed 42`
// writes today (so a change of the generator or the writer shows up here).
func TestBundledSampleIsCurrent(t *testing.T) {
	out, stderr, code := runCLI(t, "verify", samplePath, "--deep", "--width", "4")
	if code != exitOK {
		t.Fatalf("verify of the sample: exit %d\n%s%s", code, out, stderr)
	}
	s, err := reader.Open(samplePath, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Manifest()
	if m.Partitioning.Buckets != 8 || m.WidthAtWrite != 4 || len(m.States) != 3 || len(m.WorkerStates) != 2 {
		t.Fatalf("sample is %d buckets at width %d with %d states and %d per-worker states", m.Partitioning.Buckets, m.WidthAtWrite, len(m.States), len(m.WorkerStates))
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	fm, err := fixtures.Generate(context.Background(), fresh, fixtures.Spec{
		Buckets: 8, Width: 4, Keys: 700, ValueSpread: true, Seed: 42, SubKeys: 4, ListLen: 3, ValueSize: 32,
	}, writer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fm.Files) != len(m.Files) {
		t.Fatalf("fresh generation has %d files, the sample %d: regenerate examples/sample (see this test)", len(fm.Files), len(m.Files))
	}
	for i, f := range fm.Files {
		a, _ := os.ReadFile(filepath.Join(fresh, f.Path))
		b, _ := os.ReadFile(filepath.Join(samplePath, m.Files[i].Path))
		if f.Path != m.Files[i].Path || !bytes.Equal(a, b) {
			t.Fatalf("%s differs from a fresh generation: regenerate examples/sample (see this test)", f.Path)
		}
	}
}

// The README's main job: 8 buckets cannot serve 40 workers; rewritten to 64
// they can, the rewrite verifies itself, and the source is untouched.
func TestMainJobOnSample(t *testing.T) {
	before := dirHash(t, samplePath)
	target := filepath.Join(t.TempDir(), "sample-64")
	if out, stderr, code := runCLI(t, "verify", samplePath, "--width", "40"); code == exitOK {
		t.Fatalf("width 40 on 8 buckets passed verify:\n%s%s", out, stderr)
	}
	out, stderr, code := runCLI(t, "rewrite", samplePath, "--buckets", "64", "--out", target, "--quiet")
	if code != exitOK {
		t.Fatalf("rewrite: exit %d\n%s%s", code, out, stderr)
	}
	if !bytes.Contains([]byte(out), []byte("verified")) {
		t.Fatalf("rewrite summary does not report its verification:\n%s", out)
	}
	if out, stderr, code := runCLI(t, "verify", target, "--against", samplePath); code != exitOK {
		t.Fatalf("verify --against: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "verify", target, "--width", "40"); code != exitOK {
		t.Fatalf("width 40 on 64 buckets: exit %d\n%s%s", code, out, stderr)
	}
	if after := dirHash(t, samplePath); after != before {
		t.Fatal("the rewrite modified its source")
	}
	m, err := reader.Open(target, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Manifest().Partitioning; got.Buckets != 64 || got.Mapping != snapshotfmt.MappingMod {
		t.Fatalf("target partitioning %v", got)
	}
}
