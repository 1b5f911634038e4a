package writer_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// The round-trip tests build entries here, independently of the fixtures
// generator, write them with writer as a job at some width would (one
// BucketWriter per worker, concurrently), read them back with reader, and
// compare.

var testStates = []snapshotfmt.State{
	{ID: 1, Step: "count", Name: "per_user", Kind: snapshotfmt.KindValue, ValueCodec: "int64"},
	{ID: 2, Step: "sessions", Name: "open", Kind: snapshotfmt.KindMap},
	{ID: 7, Step: "window", Name: "events", Kind: snapshotfmt.KindList},
}

type entry struct{ k, v []byte }

// makeEntries returns entries for nKeys random keys (varied lengths,
// including the empty key and binary keys) in every state, in encoded-key
// order, skipping keys that hash into a bucket of skip.
func makeEntries(seed uint64, p snapshotfmt.Partitioning, nKeys int, skip map[uint32]bool) []entry {
	r := rand.New(rand.NewPCG(seed, 99))
	seen := map[string]bool{}
	var out []entry
	for i := 0; i < nKeys; i++ {
		var key []byte
		switch {
		case i == 0:
			key = []byte{}
		case i%3 == 0:
			key = make([]byte, 1+r.IntN(12))
			for j := range key {
				key[j] = byte(r.UintN(256))
			}
		default:
			key = fmt.Appendf(nil, "user-%d", r.Uint64N(1<<40))
		}
		if seen[string(key)] {
			continue
		}
		seen[string(key)] = true
		b := p.Bucket(key)
		if skip[b] {
			continue
		}
		out = append(out, entry{snapshotfmt.EncodeKey(b, 1, key, nil), binary.BigEndian.AppendUint64(nil, r.Uint64())})
		for j := 0; j < r.IntN(4); j++ {
			sub := fmt.Appendf(nil, "s%d", j)
			if j == 0 {
				sub = []byte{} // an empty sub-key is legal
			}
			out = append(out, entry{snapshotfmt.EncodeKey(b, 2, key, sub), fmt.Appendf(nil, `{"n":%d}`, r.IntN(1000))})
		}
		list := snapshotfmt.EncodeWorkerItems([][]byte{[]byte("e1"), []byte("e22")})
		out = append(out, entry{snapshotfmt.EncodeKey(b, 7, key, nil), list})
	}
	slices.SortFunc(out, func(a, b entry) int { return bytes.Compare(a.k, b.k) })
	return out
}

// writeSnapshot writes entries at width w: worker i writes the entries of
// its bucket range with its own BucketWriter, all workers concurrently.
func writeSnapshot(t *testing.T, dir string, p snapshotfmt.Partitioning, w int, entries []entry, opts writer.Options, workerState bool) *snapshotfmt.Manifest {
	t.Helper()
	s, err := writer.Create(dir, writer.Header{
		Partitioning: p, WidthAtWrite: w, States: testStates, Tool: "roundtrip test",
		Lineage: []snapshotfmt.Lineage{{Tool: "roundtrip test", Action: "generate", ToBuckets: p.Buckets, ToMapping: p.Mapping}},
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	var g errgroup.Group
	start := 0
	for i := 0; i < w; i++ {
		_, hi, ok := snapshotfmt.WorkerRange(i, w, int(p.Buckets))
		if !ok {
			continue
		}
		end := start
		for end < len(entries) {
			b, _ := snapshotfmt.KeyBucket(entries[end].k)
			if int(b) > hi {
				break
			}
			end++
		}
		part := entries[start:end]
		start = end
		// Workers without entries open no writer, except every seventh, to
		// check that an unused writer adds nothing.
		if len(part) == 0 && i%7 != 0 {
			continue
		}
		bw := s.NewBucketWriter()
		g.Go(func() error {
			for _, e := range part {
				if err := bw.Add(e.k, e.v); err != nil {
					bw.Abort()
					return err
				}
			}
			return bw.Close()
		})
	}
	if err := g.Wait(); err != nil {
		s.Abort()
		t.Fatal(err)
	}
	if start != len(entries) {
		t.Fatalf("workers took %d of %d entries", start, len(entries))
	}
	if workerState {
		items := make([][][]byte, w)
		for i := range items {
			items[i] = [][]byte{fmt.Appendf(nil, "offset-%d", i), {}}
		}
		if err := s.WriteWorkerState("source", "offsets", snapshotfmt.RuleSplit, items); err != nil {
			t.Fatal(err)
		}
	}
	m, err := s.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func readAll(t *testing.T, it *reader.Iter) []entry {
	t.Helper()
	var out []entry
	for it.Next() {
		out = append(out, entry{bytes.Clone(it.Key()), bytes.Clone(it.Value())})
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func equalEntries(t *testing.T, what string, got, want []entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].k, want[i].k) || !bytes.Equal(got[i].v, want[i].v) {
			t.Fatalf("%s: entry %d is %x=%x, want %x=%x", what, i, got[i].k, got[i].v, want[i].k, want[i].v)
		}
	}
}

// checkSnapshot reads the snapshot back every way the reader offers and
// checks it against entries and the manifest against the entries.
func checkSnapshot(t *testing.T, dir string, p snapshotfmt.Partitioning, w int, entries []entry) {
	t.Helper()
	ctx := context.Background()
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Manifest()
	if m.Partitioning != p || m.WidthAtWrite != w {
		t.Fatalf("manifest says %s at width %d", m.Partitioning, m.WidthAtWrite)
	}
	equalEntries(t, "whole snapshot", readAll(t, s.NewIterAll(ctx)), entries)

	// Counts per bucket, bytes per bucket and counts per state.
	n := int(p.Buckets)
	be, bb := make([]uint64, n), make([]uint64, n)
	se := map[uint16]uint64{}
	for _, e := range entries {
		dk, err := snapshotfmt.DecodeKey(e.k)
		if err != nil {
			t.Fatal(err)
		}
		// Every entry sits in the bucket its key hashes to.
		if want := p.Bucket(dk.Key); dk.Bucket != want {
			t.Fatalf("entry %x in bucket %d, its key hashes to %d", e.k, dk.Bucket, want)
		}
		be[dk.Bucket]++
		bb[dk.Bucket] += uint64(len(e.k) + len(e.v))
		se[dk.State]++
	}
	if !slices.Equal(m.BucketEntries, be) || !slices.Equal(m.BucketBytes, bb) {
		t.Fatalf("manifest bucket stats differ from the entries")
	}
	for _, st := range m.States {
		if st.Entries != se[st.ID] {
			t.Errorf("state %s: manifest says %d entries, there are %d", st.QualifiedName(), st.Entries, se[st.ID])
		}
	}
	var fileEntries uint64
	for _, f := range m.Files {
		fileEntries += f.Entries
		// Each file stays within one worker's range at the width of write.
		if snapshotfmt.OwnerOf(int(f.BucketLo), w, n) != snapshotfmt.OwnerOf(int(f.BucketHi), w, n) {
			t.Errorf("%s holds buckets %d..%d of two workers at width %d", f.Path, f.BucketLo, f.BucketHi, w)
		}
	}
	if fileEntries != uint64(len(entries)) {
		t.Errorf("files hold %d entries, want %d", fileEntries, len(entries))
	}

	// Per worker at the width of write and at other widths: in order, and
	// together exactly the snapshot.
	// (Width n+2, with idle workers, only for small n: each worker iterator
	// opens and checksums its files.)
	widths := []int{w, 1, 3}
	if n <= 1000 {
		widths = append(widths, n+2)
	}
	for _, ww := range widths {
		var union []entry
		for i := 0; i < ww; i++ {
			got := readAll(t, s.NewWorkerIter(ctx, i, ww))
			lo, hi, ok := snapshotfmt.WorkerRange(i, ww, n)
			for _, e := range got {
				b, _ := snapshotfmt.KeyBucket(e.k)
				if !ok || int(b) < lo || int(b) > hi {
					t.Fatalf("worker %d of %d got bucket %d, owns %d..%d (ok %v)", i, ww, b, lo, hi, ok)
				}
			}
			union = append(union, got...)
		}
		equalEntries(t, fmt.Sprintf("union of workers at width %d", ww), union, entries)
	}

	// A few bucket ranges, including single buckets and the edges.
	r := rand.New(rand.NewPCG(uint64(n), uint64(w)))
	for range 5 {
		lo := uint32(r.IntN(n))
		hi := lo + uint32(r.IntN(n-int(lo)))
		var want []entry
		for _, e := range entries {
			if b, _ := snapshotfmt.KeyBucket(e.k); b >= lo && b <= hi {
				want = append(want, e)
			}
		}
		equalEntries(t, fmt.Sprintf("buckets %d..%d", lo, hi), readAll(t, s.NewIter(ctx, lo, hi)), want)
	}
}

func TestRoundTrip(t *testing.T) {
	type tc struct {
		n, keys int
		widths  []int
	}
	cases := []tc{
		{1, 300, []int{1}},
		{8, 400, []int{1, 3, 4, 8}},
		{128, 500, []int{1, 5, 40, 128}},
		{1000, 500, []int{7, 999}},
		{32768, 300, []int{2, 1000}},
		{65536, 200, []int{1, 300}},
	}
	for _, c := range cases {
		for _, mapping := range []snapshotfmt.Mapping{snapshotfmt.MappingMod, snapshotfmt.MappingRange} {
			p, err := snapshotfmt.NewPartitioning(mapping, c.n)
			if err != nil {
				t.Fatal(err)
			}
			entries := makeEntries(uint64(c.n), p, c.keys, nil)
			for _, w := range c.widths {
				t.Run(fmt.Sprintf("N=%d/%s/W=%d", c.n, mapping, w), func(t *testing.T) {
					t.Parallel()
					dir := filepath.Join(t.TempDir(), "snap")
					// Small files so most cases have several; worker state
					// only at small widths (one fsynced file per worker).
					writeSnapshot(t, dir, p, w, entries, writer.Options{FileSize: 2 << 10}, w <= 8)
					checkSnapshot(t, dir, p, w, entries)
				})
			}
		}
	}
}

// TestRoundTripEmpty: a snapshot of zero entries is complete and readable.
func TestRoundTripEmpty(t *testing.T) {
	for _, n := range []int{1, 8, 65536} {
		p, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingRange, n)
		dir := filepath.Join(t.TempDir(), "empty")
		m := writeSnapshot(t, dir, p, 2, nil, writer.Options{}, true)
		if len(m.Files) != 0 || m.TotalEntries() != 0 || len(m.BucketEntries) != n {
			t.Fatalf("N=%d: empty snapshot manifest: %d files, %d entries, %d buckets", n, len(m.Files), m.TotalEntries(), len(m.BucketEntries))
		}
		checkSnapshot(t, dir, p, 2, nil)
		s, _ := reader.Open(dir, reader.Options{})
		items, err := s.ReadWorkerFile(s.Manifest().WorkerStates[0].Files[1])
		if err != nil || len(items) != 2 || string(items[0]) != "offset-1" || len(items[1]) != 0 {
			t.Fatalf("worker items %q, %v", items, err)
		}
	}
}

// TestRoundTripEmptyBuckets: buckets without entries between full ones.
func TestRoundTripEmptyBuckets(t *testing.T) {
	p, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 16)
	skip := map[uint32]bool{0: true, 5: true, 6: true, 15: true}
	entries := makeEntries(3, p, 300, skip)
	dir := filepath.Join(t.TempDir(), "s")
	m := writeSnapshot(t, dir, p, 4, entries, writer.Options{}, false)
	for b := range skip {
		if m.BucketEntries[b] != 0 || m.BucketBytes[b] != 0 {
			t.Errorf("bucket %d: %d entries", b, m.BucketEntries[b])
		}
	}
	checkSnapshot(t, dir, p, 4, entries)
	s, _ := reader.Open(dir, reader.Options{})
	if got := readAll(t, s.NewIter(context.Background(), 5, 6)); len(got) != 0 {
		t.Errorf("empty buckets 5..6 yield %d entries", len(got))
	}
}

// TestBigBucketSpansFiles: one bucket far above the file size is cut into
// several files, each holding only that bucket; other buckets are cut only
// at bucket boundaries.
func TestBigBucketSpansFiles(t *testing.T) {
	p, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 8)
	entries := makeEntries(5, p, 200, nil)
	// Make bucket 3 huge: many map entries under one key.
	var hot []byte
	for i := 0; ; i++ {
		k := fmt.Appendf(nil, "hot-%d", i)
		if p.Bucket(k) == 3 {
			hot = k
			break
		}
	}
	for j := 0; j < 3000; j++ {
		entries = append(entries, entry{snapshotfmt.EncodeKey(3, 2, hot, fmt.Appendf(nil, "%08d", j)), bytes.Repeat([]byte{byte(j)}, 40)})
	}
	slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare(a.k, b.k) })
	const fileSize = 16 << 10
	dir := filepath.Join(t.TempDir(), "s")
	m := writeSnapshot(t, dir, p, 2, entries, writer.Options{FileSize: fileSize, Compression: "none"}, false)
	hotFiles := 0
	for i, f := range m.Files {
		if f.BucketLo == 3 && f.BucketHi == 3 {
			hotFiles++
		}
		if i > 0 && m.Files[i-1].BucketHi == f.BucketLo && f.BucketLo != 3 {
			t.Errorf("bucket %d is split between %s and %s though it is small", f.BucketLo, m.Files[i-1].Path, f.Path)
		}
		if f.Size > 2*fileSize && !(f.BucketLo == 3 && f.BucketHi == 3) {
			t.Errorf("%s is %d bytes, far above the target %d", f.Path, f.Size, fileSize)
		}
	}
	if hotFiles < 3 {
		t.Fatalf("hot bucket 3 (%d bytes) spans %d single-bucket files, want several", m.BucketBytes[3], hotFiles)
	}
	checkSnapshot(t, dir, p, 2, entries)
	s, _ := reader.Open(dir, reader.Options{})
	if fs := s.FilesIn(3, 3); len(fs) < hotFiles {
		t.Errorf("FilesIn(3, 3) = %d files, want at least %d", len(fs), hotFiles)
	}
}

// TestCompression: every compression option round-trips.
func TestCompression(t *testing.T) {
	p, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 4)
	entries := makeEntries(9, p, 100, nil)
	for _, c := range []string{"", "snappy", "zstd", "none"} {
		dir := filepath.Join(t.TempDir(), "s")
		writeSnapshot(t, dir, p, 2, entries, writer.Options{Compression: c}, false)
		checkSnapshot(t, dir, p, 2, entries)
	}
	if _, err := writer.Create(filepath.Join(t.TempDir(), "s"), writer.Header{Partitioning: p, WidthAtWrite: 1, States: testStates}, writer.Options{Compression: "lz5"}); err == nil {
		t.Error("unknown compression accepted")
	}
}

// TestDeterministicFiles: the same entries written twice give identical
// data files (names, bytes, checksums).
func TestDeterministicFiles(t *testing.T) {
	p, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingRange, 64)
	entries := makeEntries(11, p, 500, nil)
	var sums [2][]snapshotfmt.DataFile
	var dirs [2]string
	for i := range 2 {
		dirs[i] = filepath.Join(t.TempDir(), "s")
		sums[i] = writeSnapshot(t, dirs[i], p, 4, entries, writer.Options{FileSize: 4 << 10}, true).Files
	}
	if !slices.Equal(sums[0], sums[1]) {
		t.Fatalf("file lists differ:\n%v\n%v", sums[0], sums[1])
	}
	for _, f := range sums[0] {
		a, _ := os.ReadFile(filepath.Join(dirs[0], f.Path))
		b, _ := os.ReadFile(filepath.Join(dirs[1], f.Path))
		if !bytes.Equal(a, b) || len(a) == 0 {
			t.Errorf("%s differs between two writes", f.Path)
		}
	}
}

// TestRoundTripLong is the same round trip at a size that takes minutes
// under -race; it runs only with REBUCKET_LONG=1.
func TestRoundTripLong(t *testing.T) {
	if os.Getenv("REBUCKET_LONG") == "" {
		t.Skip("set REBUCKET_LONG=1 to run")
	}
	for _, mapping := range []snapshotfmt.Mapping{snapshotfmt.MappingMod, snapshotfmt.MappingRange} {
		p, _ := snapshotfmt.NewPartitioning(mapping, 65536)
		entries := makeEntries(42, p, 200_000, nil)
		for _, w := range []int{64, 4096} {
			dir := filepath.Join(t.TempDir(), "s")
			writeSnapshot(t, dir, p, w, entries, writer.Options{FileSize: 256 << 10}, false)
			checkSnapshot(t, dir, p, w, entries)
		}
	}
}
