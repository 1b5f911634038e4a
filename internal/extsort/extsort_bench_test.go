package extsort

import (
	"context"
	"encoding/binary"
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
