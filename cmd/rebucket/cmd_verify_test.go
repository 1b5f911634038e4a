package main

import (
	"bufio"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/snapshotfmt"
)

func genVerifyFixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	if _, err := fixtures.Generate(context.Background(), dir, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestVerifyDamageExitCodes(t *testing.T) {
	for _, tc := range []struct {
		damage fixtures.Damage
		kind   string
		code   int
	}{
		{"", "", exitOK},
		{fixtures.MissingManifest, "manifest_missing", exitUsage},
		{fixtures.TruncatedManifest, "manifest_torn", exitUsage},
		{fixtures.EditedManifest, "manifest_checksum", exitUsage},
		{fixtures.ManifestPathEscape, "manifest_inconsistent", exitUsage},
		{fixtures.OverlappingRanges, "manifest_inconsistent", exitUsage},
		{fixtures.MissingDataFile, "file_missing", exitFindings},
		{fixtures.WrongSize, "file_size", exitFindings},
		{fixtures.WrongChecksum, "file_checksum", exitFindings},
		{fixtures.FlippedByte, "file_checksum", exitFindings},
		{fixtures.TruncatedTable, "table_corrupt", exitFindings},
		{fixtures.WrongBucketEntry, "wrong_bucket", exitFindings},
		{fixtures.DuplicateKeyAcrossFiles, "duplicate_key", exitFindings},
		{fixtures.EntryOutsideRange, "outside_file_range", exitFindings},
		{fixtures.StatsDisagree, "bucket_stats", exitFindings},
		{fixtures.MissingWorkerFile, "file_missing", exitFindings},
		{fixtures.UnlistedFile, "unlisted_file", exitOK},
	} {
		t.Run(string(tc.damage), func(t *testing.T) {
			dir := genVerifyFixture(t)
			if tc.damage != "" {
				if err := fixtures.Apply(context.Background(), dir, tc.damage); err != nil {
					t.Fatal(err)
				}
			}
			out, code := runRoot(t, "verify", dir, "--json")
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			var kinds []string
			var summary map[string]any
			sc := bufio.NewScanner(strings.NewReader(out))
			for sc.Scan() {
				var obj map[string]any
				if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
					t.Fatalf("not a JSON line: %q", sc.Text())
				}
				switch obj["type"] {
				case "finding":
					kinds = append(kinds, obj["kind"].(string))
				case "summary":
					summary = obj
				default:
					t.Fatalf("line without a type: %q", sc.Text())
				}
			}
			if summary == nil {
				t.Fatalf("no summary line:\n%s", out)
			}
			if tc.kind == "" && len(kinds) != 0 || tc.kind != "" && !contains(kinds, tc.kind) {
				t.Fatalf("kinds %v, want %q", kinds, tc.kind)
			}
			// The human form gives the same exit code and names the kind.
			out, code = runRoot(t, "verify", dir)
			if code != tc.code || !strings.Contains(out, tc.kind) {
				t.Fatalf("human: exit %d:\n%s", code, out)
			}
		})
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestVerifyWidthAndDeepFlags(t *testing.T) {
	dir := genVerifyFixture(t) // 8 buckets
	out, code := runRoot(t, "verify", dir, "--width", "6")
	if code != exitOK || !strings.Contains(out, "can load it") || !strings.Contains(out, "deep: automatic") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = runRoot(t, "verify", dir, "--width", "9", "--deep=false")
	if code != exitFindings || !strings.Contains(out, "width_above_buckets") || !strings.Contains(out, "not scanned") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, args := range [][]string{
		{"verify"},
		{"verify", dir, "--max-diffs", "3"},
		{"verify", dir, "--against", dir, "--width", "3"},
		{"verify", dir, "--width", "-1"},
		{"verify", dir, "--bogus"},
	} {
		if out, code := runRoot(t, args...); code != exitUsage {
			t.Fatalf("%v: exit %d:\n%s", args, code, out)
		}
	}
}

func TestVerifyAgainst(t *testing.T) {
	src := genVerifyFixture(t)
	p, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingRange, 11)
	same := filepath.Join(t.TempDir(), "same")
	if _, err := fixtures.Relayout(context.Background(), src, same, fixtures.RelayoutSpec{Partitioning: p, StateIDOffset: 2}); err != nil {
		t.Fatal(err)
	}
	out, code := runRoot(t, "verify", same, "--against", src)
	if code != exitOK || !strings.Contains(out, "equal:") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	dropped := filepath.Join(t.TempDir(), "dropped")
	if _, err := fixtures.Relayout(context.Background(), src, dropped, fixtures.RelayoutSpec{Partitioning: p,
		Edit: func(es []fixtures.Entry) []fixtures.Entry { return es[1:] }}); err != nil {
		t.Fatal(err)
	}
	out, code = runRoot(t, "verify", dropped, "--against", src, "--json")
	if code != exitFindings || !strings.Contains(out, `"kind":"missing"`) || !strings.Contains(out, `"type":"summary"`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if out, code := runRoot(t, "verify", dropped, "--against", filepath.Join(t.TempDir(), "nothing")); code != exitUsage {
		t.Fatalf("missing source: exit %d:\n%s", code, out)
	}
}
