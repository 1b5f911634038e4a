package extsort

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"testing"
)

// benchEntries returns n entries in a scrambled order: 18-byte keys with
// the shape of encoded snapshot keys and 64-byte values.
func benchEntries(n int) (keys [][]byte, value []byte) {
	keys = make([][]byte, n)
	x := uint64(88172645463325252)
	for i := range keys {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		k := make([]byte, 18)
		binary.BigEndian.PutUint32(k, uint32(x>>54))
		binary.BigEndian.PutUint64(k[6:], x)
		keys[i] = k
	}
	return keys, make([]byte, 64)
}

// BenchmarkSort measures Add, Finish and a full iteration, one op per
// entry, in memory and with spilled runs merged (the merge of sorted runs
// the shuffle and import rely on).
func BenchmarkSort(b *testing.B) {
	const n = 1 << 17
	keys, value := benchEntries(n)
	for _, c := range []struct {
		name   string
		memory int64
	}{{"memory", 256 << 20}, {"spill-8-runs", n * (18 + 64 + entryOverhead) / 8}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(n * (18 + 64))
			b.ReportAllocs()
			done := 0
			for b.Loop() {
				s := New(Options{Memory: c.memory, TmpDir: b.TempDir()})
				for _, k := range keys {
					if err := s.Add(k, value); err != nil {
						b.Fatal(err)
					}
				}
				it, err := s.Finish(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				for it.Next() {
					got++
				}
				if it.Err() != nil || got != n {
					b.Fatalf("%d entries, %v", got, it.Err())
				}
				it.Close()
				s.Close()
				done += n
			}
			// Per entry, not per sort of n.
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(done), "ns/entry")
		})
	}
}

// BenchmarkMergeRuns measures only the k-way merge of spilled runs, per
// entry: the runs are written once, then merged b.N times.
func BenchmarkMergeRuns(b *testing.B) {
	const n = 1 << 17
	keys, value := benchEntries(n)
	s := New(Options{Memory: n * (18 + 64 + entryOverhead) / 16, TmpDir: b.TempDir()})
	defer s.Close()
	for _, k := range keys {
		if err := s.Add(k, value); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.spill(); err != nil {
		b.Fatal(err)
	}
	runs := append([]string(nil), s.runs...)
	b.ReportAllocs()
	b.SetBytes(18 + 64)
	it := (*Iterator)(nil)
	for i := 0; b.Loop(); i++ {
		if it == nil || !it.Next() {
			if it != nil {
				it.Close()
			}
			it = &Iterator{ctx: context.Background()}
			for j, p := range runs {
				src, err := openRun(s.opts.FS, p, j, 64<<10)
				if err != nil {
					b.Fatal(err)
				}
				it.add(src)
			}
			if !it.Next() {
				b.Fatal("no entries")
			}
		}
	}
	if it != nil {
		it.Close()
	}
}

// TestPrefixSortMatchesStableSort checks the prefix refinement of
// sortIndex against slices.SortStableFunc on keys made to stress it: long
// shared prefixes (past maxPrefixDepth), keys that are prefixes of others,
// zero bytes where the padding is, empty keys and many duplicates.
func TestPrefixSortMatchesStableSort(t *testing.T) {
	type kv struct{ k, v []byte }
	x := uint64(7)
	rnd := func(n int) int {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(n))
	}
	long := bytes.Repeat([]byte("p"), 70)
	var in []kv
	for i := range 20000 {
		var k []byte
		switch rnd(5) {
		case 0:
			k = nil
		case 1:
			k = append(k, long[:rnd(len(long)+1)]...)
			k = append(k, byte(rnd(3)))
		case 2:
			k = make([]byte, rnd(17)) // zeros of many lengths
		case 3:
			k = binary.BigEndian.AppendUint32(nil, uint32(rnd(4)))
			k = append(k, "user-00000"...)
			k = append(k, byte('0'+rnd(10)), byte('0'+rnd(10)))
		default:
			k = append(append([]byte(nil), long...), byte(rnd(2)), 0, byte(rnd(2)))
		}
		in = append(in, kv{k, binary.BigEndian.AppendUint32(nil, uint32(i))})
	}
	want := slices.Clone(in)
	slices.SortStableFunc(want, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	for _, mem := range []int64{64 << 20, 64 << 10} {
		s := New(Options{Memory: mem, TmpDir: t.TempDir()})
		for _, e := range in {
			if err := s.Add(e.k, e.v); err != nil {
				t.Fatal(err)
			}
		}
		it, err := s.Finish(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for ; it.Next(); i++ {
			if !bytes.Equal(it.Key(), want[i].k) || !bytes.Equal(it.Value(), want[i].v) {
				t.Fatalf("memory %d: entry %d is %x=%x, want %x=%x", mem, i, it.Key(), it.Value(), want[i].k, want[i].v)
			}
		}
		if it.Err() != nil || i != len(want) {
			t.Fatalf("memory %d: %d entries, %v", mem, i, it.Err())
		}
		it.Close()
		s.Close()
	}
}
