package rewrite

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
)

// damagedSources are sources that verify rejects but whose checksums and
// manifest agree, so only reading the data (or decoding per-worker state)
// can tell (issue 14, items 8 and 10).
var damagedSources = []struct {
	name   string
	damage func(t *testing.T, dir string)
}{
	{"an entry past the file's declared range", func(t *testing.T, dir string) {
		must(t, fixtures.Apply(context.Background(), dir, fixtures.EntryOutsideRange))
	}},
	// A file of several buckets is read bucket by bucket; an entry after
	// its last bucket was cut off by the table iterator's bounds.
	{"an entry past the range of a file of several buckets, stats updated", func(t *testing.T, dir string) {
		entryPastRange(t, dir, false)
	}},
	{"an entry past the range of a file of several buckets, stats as before", func(t *testing.T, dir string) {
		entryPastRange(t, dir, true)
	}},
	{"two files of several buckets with swapped contents", func(t *testing.T, dir string) {
		m := manifestOf(t, dir)
		multi := func(f snapshotfmt.DataFile) bool { return f.BucketLo < f.BucketHi }
		i, j := slices.IndexFunc(m.Files, multi), -1
		for k := range m.Files {
			if multi(m.Files[k]) {
				j = k
			}
		}
		if i < 0 || m.Files[i].BucketHi >= m.Files[j].BucketLo {
			t.Fatalf("no two files of several buckets apart: %d, %d", i, j)
		}
		pi, pj := filepath.Join(dir, m.Files[i].Path), filepath.Join(dir, m.Files[j].Path)
		a, err := os.ReadFile(pi)
		must(t, err)
		b, err := os.ReadFile(pj)
		must(t, err)
		must(t, os.WriteFile(pi, b, 0o644))
		must(t, os.WriteFile(pj, a, 0o644))
		must(t, fixtures.EditManifest(dir, func(m *snapshotfmt.Manifest) {
			fi, fj := &m.Files[i], &m.Files[j]
			fi.Size, fj.Size = fj.Size, fi.Size
			fi.Checksum, fj.Checksum = fj.Checksum, fi.Checksum
		}))
	}},
	{"bucket counts unlike the data", func(t *testing.T, dir string) {
		must(t, fixtures.Apply(context.Background(), dir, fixtures.StatsDisagree))
	}},
	{"a value state entry with a sub-key", func(t *testing.T, dir string) {
		m := manifestOf(t, dir)
		value := fixtures.States[0]
		if value.Kind != snapshotfmt.KindValue {
			t.Fatalf("fixtures.States[0] is %s", value.Kind)
		}
		must(t, fixtures.RebuildFile(context.Background(), dir, len(m.Files)/2, false, func(es []fixtures.Entry) []fixtures.Entry {
			i := slices.IndexFunc(es, func(e fixtures.Entry) bool { return e.State == value.ID })
			if i < 0 {
				t.Fatal("no value state entry in the file")
			}
			es[i].SubKey = []byte("x")
			return es
		}))
	}},
	{"a per-worker item running past the end", func(t *testing.T, dir string) {
		must(t, fixtures.RewriteWorkerFile(dir, 0, 0, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b, uint32(len(b)))
			return b
		}))
	}},
	{"per-worker state with trailing bytes", func(t *testing.T, dir string) {
		must(t, fixtures.RewriteWorkerFile(dir, 0, 0, func(b []byte) []byte { return append(b, 0, 0) }))
	}},
	{"a per-worker item count unlike the manifest's", func(t *testing.T, dir string) {
		must(t, fixtures.EditManifest(dir, func(m *snapshotfmt.Manifest) { m.WorkerStates[0].Files[0].Items++ }))
	}},
}

// TestDamagedSourceRefused: rewrite (every strategy) and split refuse each
// damaged source with ErrCorrupt (exit 2) and publish nothing. Before,
// entries past a file's range were dropped with exit 0, swapped files gave
// an "internal error" (exit 4), and damaged per-worker state and sub-keys
// on value state were published with "per-worker state is byte-identical".
func TestDamagedSourceRefused(t *testing.T) {
	tmp := t.TempDir()
	clean := filepath.Join(tmp, "clean")
	if _, err := fixtures.Generate(context.Background(), clean, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		t.Fatal(err)
	}
	for di, d := range damagedSources {
		t.Run(d.name, func(t *testing.T) {
			src := filepath.Join(tmp, fmt.Sprint("src", di))
			must(t, os.CopyFS(src, os.DirFS(clean)))
			d.damage(t, src)
			before := treeHash(t, src)
			out := filepath.Join(tmp, fmt.Sprint("out", di))
			must(t, os.Mkdir(out, 0o755))
			for _, to := range []uint32{16, 4, 12, 7} {
				dst := filepath.Join(out, fmt.Sprint("to", to))
				_, err := Run(context.Background(), Options{Source: src, Target: dst, To: snapshotfmt.Partitioning{Buckets: to}, Parallelism: 2, SkipDiskCheck: true})
				if !errors.Is(err, snapshotfmt.ErrCorrupt) {
					t.Fatalf("rewrite to %d buckets: %v, want ErrCorrupt", to, err)
				}
			}
			rule, _ := ParseSplitRule("buckets=0-3")
			_, err := Split(context.Background(), SplitOptions{Source: src, OutA: filepath.Join(out, "a"), OutB: filepath.Join(out, "b"), Rule: rule, Parallelism: 2, SkipDiskCheck: true})
			if !errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Fatalf("split: %v, want ErrCorrupt", err)
			}
			if ents, _ := os.ReadDir(out); len(ents) != 0 {
				t.Fatalf("%s was published", ents[0].Name())
			}
			if treeHash(t, src) != before {
				t.Fatal("the source changed")
			}
		})
	}
}

// entryPastRange adds to the first file of several buckets (that is not
// the last bucket's) an entry of the bucket after its declared range,
// keeping its declared bounds. With keepStats the manifest's bucket and
// state counts stay as they were, so only the file's entry count and
// checksum know of the entry.
func entryPastRange(t *testing.T, dir string, keepStats bool) {
	before := manifestOf(t, dir)
	i := slices.IndexFunc(before.Files, func(f snapshotfmt.DataFile) bool {
		return f.BucketLo < f.BucketHi && f.BucketHi+1 < before.Partitioning.Buckets
	})
	if i < 0 {
		t.Fatal("no file of several buckets before the last")
	}
	b := before.Files[i].BucketHi + 1
	k := 3_000_000
	for before.Partitioning.Bucket(fixtures.Key(k)) != b {
		k++
	}
	e := fixtures.Entry{Bucket: b, State: fixtures.States[0].ID, Key: fixtures.Key(k), Value: []byte{0, 0, 0, 0, 0, 0, 0, 9}}
	must(t, fixtures.RebuildFile(context.Background(), dir, i, true, func(es []fixtures.Entry) []fixtures.Entry { return append(es, e) }))
	if keepStats {
		must(t, fixtures.EditManifest(dir, func(m *snapshotfmt.Manifest) {
			m.BucketEntries, m.BucketBytes, m.States = before.BucketEntries, before.BucketBytes, before.States
		}))
	}
}

func manifestOf(t *testing.T, dir string) *snapshotfmt.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, snapshotfmt.ManifestName))
	must(t, err)
	m, err := snapshotfmt.DecodeManifest(data)
	must(t, err)
	return m
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSelfCheckProvesValidity: the self-check fails an output that equals
// its source but is not valid, even when the source is equally damaged:
// per-worker state that does not decode, and a sub-key on a value state
// (which the fingerprints ignore for such states). Before, both passed as
// "per-worker state is byte-identical".
func TestSelfCheckProvesValidity(t *testing.T) {
	cases := []struct {
		name, kind string
		damage     func(t *testing.T, dir string)
	}{
		{"per-worker state with trailing bytes", "worker_state_invalid", func(t *testing.T, dir string) {
			must(t, fixtures.RewriteWorkerFile(dir, 0, 0, func(b []byte) []byte { return append(b, 0, 0) }))
		}},
		{"a value state entry with a sub-key", "malformed", func(t *testing.T, dir string) {
			must(t, fixtures.RebuildFile(context.Background(), dir, 0, false, func(es []fixtures.Entry) []fixtures.Entry {
				i := slices.IndexFunc(es, func(e fixtures.Entry) bool { return e.State == fixtures.States[0].ID })
				if i < 0 {
					t.Fatal("no value state entry in the file")
				}
				es[i].SubKey = []byte("x")
				return es
			}))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			src := filepath.Join(tmp, "src")
			if _, err := fixtures.Generate(context.Background(), src, fixtures.Spec{Buckets: 8, Keys: 200}, fixtures.DamageWriterOptions()); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(tmp, "dst")
			opts := Options{Source: src, Target: dst, To: snapshotfmt.Partitioning{Buckets: 8}, NoVerify: true}
			sum, err := Run(context.Background(), opts)
			must(t, err)
			c.damage(t, dst)
			if c.kind == "worker_state_invalid" {
				c.damage(t, src) // equal bytes on both sides
			}
			s, err := reader.Open(src, reader.Options{})
			must(t, err)
			out, err := reader.Open(dst, reader.Options{})
			must(t, err)
			want, err := verify.Fingerprints(context.Background(), out, sum.To, verify.FingerprintOptions{})
			if c.kind == "malformed" && errors.Is(err, snapshotfmt.ErrCorrupt) {
				// The reader itself refuses a sub-key on a value state
				// (reader.FileIter), so every read of the output, the
				// self-check's included, fails before publishing.
				return
			}
			must(t, err)
			v, err := selfCheck(context.Background(), opts, dst, s, sum, want)
			if err != nil || v.Verified || v.ByKind[c.kind] != 1 {
				t.Fatalf("%+v %v, want 1 %s", v, err, c.kind)
			}
		})
	}
}
