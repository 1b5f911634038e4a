package verify

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

func part(t testing.TB, m snapshotfmt.Mapping, n int) snapshotfmt.Partitioning {
	t.Helper()
	p, err := snapshotfmt.NewPartitioning(m, n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func genSource(t testing.TB, mapping snapshotfmt.Mapping) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	spec := fixtures.Spec{Buckets: 8, Width: 4, Keys: 300, Mapping: mapping, Seed: 3, ValueSpread: true}
	if _, err := fixtures.Generate(context.Background(), dir, spec, fixtures.DamageWriterOptions()); err != nil {
		t.Fatal(err)
	}
	return dir
}

func relayout(t testing.TB, src string, spec fixtures.RelayoutSpec) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "dst")
	if spec.Writer.FileSize == 0 {
		spec.Writer.FileSize = 8 << 10
	}
	if _, err := fixtures.Relayout(context.Background(), src, dst, spec); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestEqualAcrossLayouts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		srcMap  snapshotfmt.Mapping
		mapping snapshotfmt.Mapping
		buckets int
		width   int
	}{
		{"mod8-to-mod16", snapshotfmt.MappingMod, snapshotfmt.MappingMod, 16, 4},
		{"mod8-to-range13-width5", snapshotfmt.MappingMod, snapshotfmt.MappingRange, 13, 5},
		{"mod8-to-mod3-width3", snapshotfmt.MappingMod, snapshotfmt.MappingMod, 3, 3},
		{"range8-to-range20", snapshotfmt.MappingRange, snapshotfmt.MappingRange, 20, 6},
		{"range8-to-range1", snapshotfmt.MappingRange, snapshotfmt.MappingRange, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := genSource(t, tc.srcMap)
			dst := relayout(t, src, fixtures.RelayoutSpec{Partitioning: part(t, tc.mapping, tc.buckets), Width: tc.width, StateIDOffset: 5})
			var fs []Finding
			sum, err := Equal(context.Background(), dst, src, EqualOptions{}, collect(&fs))
			if err != nil {
				t.Fatal(err)
			}
			if !sum.Equal || len(fs) != 0 || sum.BucketsDiffering != 0 || sum.WorkerStates != 2 {
				t.Fatalf("equal=%v differing=%d findings:\n%s", sum.Equal, sum.BucketsDiffering, lines(fs))
			}
			// And the other way round: SOURCE's layout as the target.
			sum, err = Equal(context.Background(), src, dst, EqualOptions{}, collect(&fs))
			if err != nil || !sum.Equal || len(fs) != 0 {
				t.Fatalf("reverse: err=%v equal=%v findings:\n%s", err, sum.Equal, lines(fs))
			}
		})
	}
}

func TestEqualFindsDifferences(t *testing.T) {
	src := genSource(t, snapshotfmt.MappingMod)
	p := part(t, snapshotfmt.MappingRange, 12)
	// pick is an entry in the middle, a map entry (state 2 before the
	// offset) so the sub-key is named too.
	type Entry = fixtures.Entry
	pick := func(es []Entry) int {
		for i := len(es) / 2; i < len(es); i++ {
			if es[i].State == 2+5 {
				return i
			}
		}
		t.Fatal("no map entry")
		return 0
	}
	for _, tc := range []struct {
		name  string
		edit  func(es []Entry) ([]Entry, Entry)
		kinds []Kind
	}{
		{"dropped", func(es []Entry) ([]Entry, Entry) {
			i := pick(es)
			e := es[i]
			return slices.Delete(es, i, i+1), e
		}, []Kind{Missing}},
		{"duplicated", func(es []Entry) ([]Entry, Entry) {
			e := es[pick(es)]
			d := e
			d.Bucket = (e.Bucket + 1) % 12
			return append(es, d), e
		}, []Kind{Extra, Misplaced}},
		{"changed", func(es []Entry) ([]Entry, Entry) {
			i := pick(es)
			es[i].Value = append(slices.Clone(es[i].Value), 'x')
			return es, es[i]
		}, []Kind{Changed}},
		{"moved", func(es []Entry) ([]Entry, Entry) {
			i := pick(es)
			es[i].Bucket = (es[i].Bucket + 5) % 12
			return es, es[i]
		}, []Kind{Misplaced}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var victim Entry
			dst := relayout(t, src, fixtures.RelayoutSpec{Partitioning: p, StateIDOffset: 5, Edit: func(es []Entry) []Entry {
				var out []Entry
				out, victim = tc.edit(es)
				return out
			}})
			var fs []Finding
			sum, err := Equal(context.Background(), dst, src, EqualOptions{}, collect(&fs))
			if err != nil {
				t.Fatal(err)
			}
			if got := kindsOf(fs, SevError); sum.Equal || !slices.Equal(got, tc.kinds) {
				t.Fatalf("kinds %v, want %v:\n%s", got, tc.kinds, lines(fs))
			}
			for _, f := range fs {
				if f.KeyText != string(victim.Key) || f.SubKeyText != string(victim.SubKey) || f.State != "sessions/open" {
					t.Fatalf("finding does not name %q/%q: %s", victim.Key, victim.SubKey, f)
				}
			}
		})
	}
	t.Run("worker-item", func(t *testing.T) {
		dst := relayout(t, src, fixtures.RelayoutSpec{Partitioning: p, EditWorkers: func(ws snapshotfmt.WorkerState, items [][][]byte) [][][]byte {
			if ws.Rule == snapshotfmt.RuleSplit {
				items[1] = slices.Clone(items[1])
				items[1][0] = []byte("events-9:0")
			}
			return items
		}})
		var fs []Finding
		sum, err := Equal(context.Background(), dst, src, EqualOptions{}, collect(&fs))
		if err != nil {
			t.Fatal(err)
		}
		if sum.Equal || len(fs) != 1 || fs[0].Kind != WorkerStateDiff || fs[0].State != "source/offsets" {
			t.Fatalf("findings:\n%s", lines(fs))
		}
	})
}

func TestEqualMaxDiffs(t *testing.T) {
	src := genSource(t, snapshotfmt.MappingMod)
	dst := relayout(t, src, fixtures.RelayoutSpec{Partitioning: part(t, snapshotfmt.MappingMod, 4), Edit: func(es []fixtures.Entry) []fixtures.Entry {
		return es[:len(es)-40]
	}})
	var fs []Finding
	sum, err := Equal(context.Background(), dst, src, EqualOptions{MaxDiffs: 3}, collect(&fs))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 4 || sum.ByKind[Missing] != 40 || sum.Errors != 40 {
		t.Fatalf("listed %d, counted %d (errors %d):\n%s", len(fs), sum.ByKind[Missing], sum.Errors, lines(fs))
	}
}

// The fingerprint API a rewrite calls: a snapshot and its copy at another
// layout give the same fingerprints under one layout.
func TestFingerprintsAPI(t *testing.T) {
	src := genSource(t, snapshotfmt.MappingMod)
	p := part(t, snapshotfmt.MappingRange, 7)
	dst := relayout(t, src, fixtures.RelayoutSpec{Partitioning: p, StateIDOffset: 1})
	fp := func(dir string) FingerprintSet {
		s, err := reader.Open(dir, reader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		f, err := Fingerprints(context.Background(), s, p, FingerprintOptions{Parallelism: 3})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, b := fp(src), fp(dst)
	if d := a.Differ(b); len(d) != 0 {
		t.Fatalf("buckets %v differ", d)
	}
	var total uint64
	for _, f := range a.Buckets {
		total += f.Count
	}
	if len(a.Buckets) != 7 || total == 0 {
		t.Fatalf("fingerprints %+v", a)
	}
	// One changed value changes exactly one bucket's fingerprint.
	dst2 := relayout(t, src, fixtures.RelayoutSpec{Partitioning: p, Edit: func(es []fixtures.Entry) []fixtures.Entry {
		es[10].Value = []byte("changed")
		return es
	}})
	if d := a.Differ(fp(dst2)); len(d) != 1 {
		t.Fatalf("differing buckets %v, want one", d)
	}
}

func TestHashRange(t *testing.T) {
	for _, n := range []uint32{1, 3, 7, 8, 13, 65536} {
		p := snapshotfmt.Partitioning{Hash: snapshotfmt.HashName, Mapping: snapshotfmt.MappingRange, Buckets: n}
		prevHi := ^uint64(0)
		for b := uint32(0); b < n; b++ {
			lo, hi := hashRange(b, n)
			if lo != prevHi+1 || p.BucketOfHash(lo) != b || p.BucketOfHash(hi) != b || (lo > 0 && p.BucketOfHash(lo-1) != b-1) {
				t.Fatalf("n=%d b=%d: range %x..%x", n, b, lo, hi)
			}
			prevHi = hi
		}
		if prevHi != ^uint64(0) {
			t.Fatalf("n=%d: last bucket ends at %x", n, prevHi)
		}
	}
}

// Range to range reads only the source files whose buckets overlap each
// differing target bucket; batches bounded by DiffMemory take several
// passes. Either way every difference is found.
func TestEqualRangeToRangeBatches(t *testing.T) {
	src := genSource(t, snapshotfmt.MappingRange)
	var dropped []fixtures.Entry
	dst := relayout(t, src, fixtures.RelayoutSpec{Partitioning: part(t, snapshotfmt.MappingRange, 20), Edit: func(es []fixtures.Entry) []fixtures.Entry {
		var out []fixtures.Entry
		for i, e := range es {
			if i%97 == 0 {
				dropped = append(dropped, e)
				continue
			}
			out = append(out, e)
		}
		return out
	}})
	for _, mem := range []int64{0, 1} {
		var fs []Finding
		sum, err := Equal(context.Background(), dst, src, EqualOptions{MaxDiffs: 1000, DiffMemory: mem}, collect(&fs))
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != len(dropped) || sum.ByKind[Missing] != len(dropped) {
			t.Fatalf("DiffMemory %d: %d findings for %d dropped entries:\n%s", mem, len(fs), len(dropped), lines(fs))
		}
		if mem == 1 && sum.DiffPasses != sum.BucketsDiffering {
			t.Fatalf("DiffMemory 1: %d passes for %d buckets", sum.DiffPasses, sum.BucketsDiffering)
		}
		want := map[string]bool{}
		for _, e := range dropped {
			want[string(e.Key)+"/"+string(e.SubKey)] = true
		}
		for _, f := range fs {
			if !want[f.KeyText+"/"+f.SubKeyText] {
				t.Fatalf("unexpected finding %s", f)
			}
		}
	}
}
