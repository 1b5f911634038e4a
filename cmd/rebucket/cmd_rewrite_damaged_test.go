package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// TestRewriteSplitDamagedSourceExit2: rewrite and split of a source whose
// data disagrees with its (resealed) manifest exit 2 with the damaged file
// named, and publish nothing (issue 14, items 8 and 10: exit 0 with an
// entry dropped or damaged per-worker state copied, or exit 4 "internal
// error").
func TestRewriteSplitDamagedSourceExit2(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string) string // returns what the message must name
	}{
		{"entry past a file's range", func(t *testing.T, dir string) string {
			var file string
			var e fixtures.Entry
			must := func(err error) {
				if err != nil {
					t.Fatal(err)
				}
			}
			must(fixtures.EditManifest(dir, func(m *snapshotfmt.Manifest) {
				i := slices.IndexFunc(m.Files, func(f snapshotfmt.DataFile) bool {
					return f.BucketLo < f.BucketHi && f.BucketHi+1 < m.Partitioning.Buckets
				})
				if i < 0 {
					t.Fatal("no file of several buckets before the last")
				}
				file = m.Files[i].Path
				b := m.Files[i].BucketHi + 1
				k := 3_000_000
				for m.Partitioning.Bucket(fixtures.Key(k)) != b {
					k++
				}
				e = fixtures.Entry{Bucket: b, State: fixtures.States[0].ID, Key: fixtures.Key(k), Value: make([]byte, 8)}
			}))
			data, err := os.ReadFile(filepath.Join(dir, snapshotfmt.ManifestName))
			must(err)
			m, err := snapshotfmt.DecodeManifest(data)
			must(err)
			i := slices.IndexFunc(m.Files, func(f snapshotfmt.DataFile) bool { return f.Path == file })
			must(fixtures.RebuildFile(context.Background(), dir, i, true, func(es []fixtures.Entry) []fixtures.Entry { return append(es, e) }))
			return file
		}},
		{"per-worker item count unlike the manifest's", func(t *testing.T, dir string) string {
			var file string
			if err := fixtures.EditManifest(dir, func(m *snapshotfmt.Manifest) {
				m.WorkerStates[0].Files[0].Items++
				file = m.WorkerStates[0].Files[0].Path
			}); err != nil {
				t.Fatal(err)
			}
			return file
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 300})
			file := c.damage(t, src)
			dir := t.TempDir()
			for _, args := range [][]string{
				{"rewrite", src, "--buckets", "16", "--out", filepath.Join(dir, "r")},
				{"split", src, "--by", "buckets=0-3", "--out", filepath.Join(dir, "a"), "--out", filepath.Join(dir, "b")},
			} {
				out, code := runRoot(t, args...)
				if code != exitUsage || !strings.Contains(out, file) {
					t.Errorf("%s: exit %d, want %d naming %s: %s", args[0], code, exitUsage, file, out)
				}
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("%s was published", ents[0].Name())
			}
		})
	}
}
