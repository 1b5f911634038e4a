package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// TestZeroAndAbsurdFlagsRefused: each of these used to be accepted: a 0
// was read as "use the default" or "do nothing" (exit 0), a width above
// FORMAT's cap was planned worker by worker. Each is now exit 2 with a
// message naming the flag and its range.
func TestZeroAndAbsurdFlagsRefused(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 50})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", src, "--buckets", "0"}, "--buckets 0: want 1..65536"},
		{[]string{"plan", src, "--buckets", "70000"}, "--buckets 70000"},
		{[]string{"plan", src, "--widths", "2000000"}, "width 2000000: want 1..1048576"},
		{[]string{"plan", src, "--widths", "0"}, "width 0"},
		{[]string{"plan", src, "--top-keys", "0"}, "--top-keys 0"},
		{[]string{"plan", src, "--top-keys", "100000000"}, "--top-keys 100000000"},
		{[]string{"plan", "--recommend", "--peak-width", "40", "--headroom", "0"}, "--headroom 0"},
		{[]string{"plan", "--recommend", "--peak-width", "0"}, "--peak-width 0"},
		{[]string{"plan", "--recommend", "--peak-width", "100000"}, "--peak-width 100000"},
		{[]string{"verify", src, "--width", "0"}, "--width 0: want 1..1048576"},
		{[]string{"verify", src, "--width", "2000000"}, "--width 2000000"},
		{[]string{"locate", src, "k", "--width", "0"}, "--width 0"},
		{[]string{"locate", src, "k", "--width", "-3"}, "--width -3"},
		{[]string{"locate", src, "k", "--limit", "0"}, "--limit 0"},
		{[]string{"inspect", src, "--top-keys", "0"}, "--top-keys 0"},
		// A million one-byte files, 3 GB and a failure at commit, 341 s on.
		{[]string{"rewrite", src, "--buckets", "16", "--out", filepath.Join(t.TempDir(), "o"), "--file-size", "1"}, "--file-size 1 B is below the 4.0 KiB floor"},
		{[]string{"split", src, "--by", "buckets=0-3", "--out", filepath.Join(t.TempDir(), "a"), "--out", filepath.Join(t.TempDir(), "b"), "--file-size", "1"}, "--file-size 1 B"},
		{[]string{"generate", "--out", filepath.Join(t.TempDir(), "g"), "--file-size", "100"}, "--file-size 100 B"},
		{[]string{"import", filepath.Join(t.TempDir(), "none.parquet"), "--buckets", "8", "--out", filepath.Join(t.TempDir(), "i"), "--file-size", "1"}, "--file-size 1 B"},
		// 70,000 Pebble stores, about 2 GiB and 20 minutes, without a word.
		{[]string{"load", src, "--width", "70000", "--on-excess", "idle", "--into", filepath.Join(t.TempDir(), "l")}, "would build 70000 worker stores (69992 of the 70000 workers own no bucket"},
		{[]string{"load", src, "--width", "0", "--into", filepath.Join(t.TempDir(), "l")}, "--width 0"},
		{[]string{"load", src, "--width", "2000000", "--on-excess", "idle", "--into", filepath.Join(t.TempDir(), "l")}, "--width 2000000"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, code := runRoot(t, tc.args...)
			if code != exitUsage || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, exitUsage, tc.want, out)
			}
		})
	}
	// The widest width a manifest can record is still planned, quickly.
	if out, code := runRoot(t, "--json", "plan", src, "--widths", "1048576"); code != exitOK || len(out) > 1<<20 {
		t.Fatalf("plan --widths 1048576: exit %d, %d bytes", code, len(out))
	}
}

// The way out the load cap names works: a subset of a wide start.
func TestLoadWideStartBySubset(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 50})
	into := filepath.Join(t.TempDir(), "l")
	out, code := runRoot(t, "load", src, "--width", "70000", "--on-excess", "idle", "--workers", "0,69999", "--into", into, "-q")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// A resealed manifest listing a file of 2^62 bytes reached the disk-space
// check of rewrite and load and was refused there (exit 3), as if the disk
// were small. It is damage: exit 2 from every command that reads it.
func TestHugeListedFileIsDamage(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 50})
	mp := filepath.Join(src, snapshotfmt.ManifestName)
	data, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	var m snapshotfmt.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m.Files[0].Size = 1 << 62
	if data, err = m.Encode(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"rewrite", src, "--buckets", "16", "--out", filepath.Join(t.TempDir(), "o")},
		{"load", src, "--width", "2", "--into", filepath.Join(t.TempDir(), "l")},
		{"inspect", src},
	} {
		out, code := runRoot(t, args...)
		if code != exitUsage || !strings.Contains(out, "1 TiB bound") {
			t.Errorf("%s: exit %d, want %d naming the bound:\n%s", args[0], code, exitUsage, out)
		}
	}
}
