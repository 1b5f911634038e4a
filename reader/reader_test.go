package reader_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// openGenerated generates a small snapshot with many small files (several
// per bucket for some buckets) and opens it.
func openGenerated(t *testing.T, spec fixtures.Spec, fileSize int64) *reader.Snapshot {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	if _, err := fixtures.Generate(context.Background(), dir, spec, writer.Options{FileSize: fileSize}); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type kv struct{ k, v []byte }

func collect(t *testing.T, it *reader.Iter) []kv {
	t.Helper()
	var out []kv
	for it.Next() {
		out = append(out, kv{bytes.Clone(it.Key()), bytes.Clone(it.Value())})
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOpenNotASnapshot(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, tc := range []struct {
		name, path string
	}{
		{"missing directory", filepath.Join(dir, "nope")},
		{"a file", file},
		{"directory without manifest", dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := reader.Open(tc.path, reader.Options{}); !errors.Is(err, snapshotfmt.ErrNotFound) {
				t.Errorf("Open: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestOpenSymlinkedManifest: a manifest that is a symbolic link is refused,
// even when it points at a valid manifest.
func TestOpenSymlinkedManifest(t *testing.T) {
	s := openGenerated(t, fixtures.Spec{Keys: 20}, 0)
	other := filepath.Join(t.TempDir(), "snap")
	os.Mkdir(other, 0o755)
	if err := os.Symlink(s.Path(snapshotfmt.ManifestName), filepath.Join(other, snapshotfmt.ManifestName)); err != nil {
		t.Skip(err)
	}
	if _, err := reader.Open(other, reader.Options{}); !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Errorf("Open via symlink: %v, want ErrCorrupt", err)
	}
}

// TestIterBounds: iterating a bucket range gives exactly the entries of
// those buckets, also where a bucket spans several files and where a range
// starts or ends inside a file.
func TestIterBounds(t *testing.T) {
	s := openGenerated(t, fixtures.Spec{Buckets: 16, Width: 2, Keys: 200, Skew: fixtures.Zipf}, 2<<10)
	m := s.Manifest()
	ctx := context.Background()
	all := collect(t, s.NewIterAll(ctx))
	if uint64(len(all)) != m.TotalEntries() {
		t.Fatalf("NewIterAll gave %d entries, manifest says %d", len(all), m.TotalEntries())
	}
	multi := false
	for i := 1; i < len(m.Files); i++ {
		multi = multi || m.Files[i-1].BucketHi == m.Files[i].BucketLo
	}
	if !multi {
		t.Fatal("fixture has no bucket spanning files; the test needs one")
	}
	n := uint32(m.Partitioning.Buckets)
	for lo := uint32(0); lo < n; lo++ {
		for _, hi := range []uint32{lo, min(lo+1, n-1), n - 1} {
			var want []kv
			for _, e := range all {
				if b, _ := snapshotfmt.KeyBucket(e.k); b >= lo && b <= hi {
					want = append(want, e)
				}
			}
			got := collect(t, s.NewIter(ctx, lo, hi))
			if len(got) != len(want) {
				t.Fatalf("buckets %d..%d: %d entries, want %d", lo, hi, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i].k, want[i].k) || !bytes.Equal(got[i].v, want[i].v) {
					t.Fatalf("buckets %d..%d: entry %d differs", lo, hi, i)
				}
			}
			// FilesIn lists exactly the files that overlap lo..hi.
			for _, f := range s.FilesIn(lo, hi) {
				if f.BucketHi < lo || f.BucketLo > hi {
					t.Errorf("FilesIn(%d, %d) lists %s (%d..%d)", lo, hi, f.Path, f.BucketLo, f.BucketHi)
				}
			}
			count := 0
			for _, f := range m.Files {
				if f.BucketHi >= lo && f.BucketLo <= hi {
					count++
				}
			}
			if got := len(s.FilesIn(lo, hi)); got != count {
				t.Errorf("FilesIn(%d, %d) = %d files, want %d", lo, hi, got, count)
			}
		}
	}
}

func TestWorkerIterIdle(t *testing.T) {
	s := openGenerated(t, fixtures.Spec{Buckets: 4, Width: 2, Keys: 50}, 0)
	ctx := context.Background()
	total := 0
	for i := 0; i < 7; i++ {
		got := collect(t, s.NewWorkerIter(ctx, i, 7))
		_, _, ok := s.WorkerBuckets(i, 7)
		if !ok && len(got) != 0 {
			t.Errorf("idle worker %d of 7 got %d entries", i, len(got))
		}
		total += len(got)
	}
	if uint64(total) != s.Manifest().TotalEntries() {
		t.Errorf("workers of 7 got %d entries, snapshot has %d", total, s.Manifest().TotalEntries())
	}
}

func TestIterCancelled(t *testing.T) {
	s := openGenerated(t, fixtures.Spec{Buckets: 8, Keys: 100}, 1<<10)
	ctx, cancel := context.WithCancel(context.Background())
	it := s.NewIterAll(ctx)
	defer it.Close()
	if !it.Next() {
		t.Fatal(it.Err())
	}
	cancel()
	for it.Next() {
	}
	if !errors.Is(it.Err(), context.Canceled) {
		t.Errorf("Err after cancel = %v", it.Err())
	}
}

// TestOpenFileBounds reads one file with bounds inside it.
func TestOpenFileBounds(t *testing.T) {
	s := openGenerated(t, fixtures.Spec{Buckets: 8, Width: 1, Keys: 100}, 0)
	m := s.Manifest()
	if len(m.Files) != 1 || m.Files[0].BucketLo != 0 || m.Files[0].BucketHi != 7 {
		t.Fatalf("want one file of buckets 0..7, have %+v", m.Files)
	}
	fi, err := s.OpenFile(context.Background(), m.Files[0], snapshotfmt.BucketPrefix(2), snapshotfmt.BucketUpperBound(3))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for fi.Next() {
		if b, _ := snapshotfmt.KeyBucket(fi.Key()); b < 2 || b > 3 {
			t.Fatalf("bucket %d outside 2..3", b)
		}
		n++
	}
	if err := fi.Err(); err != nil {
		t.Fatal(err)
	}
	fi.Close()
	if want := m.BucketEntries[2] + m.BucketEntries[3]; uint64(n) != want {
		t.Errorf("%d entries in buckets 2..3, want %d", n, want)
	}
}

func TestReadWorkerFiles(t *testing.T) {
	s := openGenerated(t, fixtures.Spec{Buckets: 8, Width: 3, Keys: 30}, 0)
	for _, ws := range s.Manifest().WorkerStates {
		for _, wf := range ws.Files {
			raw, err := s.ReadWorkerFileRaw(wf)
			if err != nil {
				t.Fatal(err)
			}
			if snapshotfmt.Checksum(raw) != wf.Checksum || int64(len(raw)) != wf.Size {
				t.Errorf("%s: raw bytes do not match the manifest", wf.Path)
			}
			items, err := s.ReadWorkerFile(wf)
			if err != nil {
				t.Fatal(err)
			}
			if uint64(len(items)) != wf.Items || !bytes.Equal(snapshotfmt.EncodeWorkerItems(items), raw) {
				t.Errorf("%s: %d items, manifest says %d", wf.Path, len(items), wf.Items)
			}
		}
	}
}
