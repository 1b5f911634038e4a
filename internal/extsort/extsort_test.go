package extsort

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

type kv struct{ k, v []byte }

func randomEntries(n int, seed uint64) []kv {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]kv, n)
	for i := range out {
		// Few distinct keys so duplicates are common; values record the
		// insertion order so stability can be checked.
		k := fmt.Appendf(nil, "k%05d", r.IntN(n/3+1))
		v := append(fmt.Appendf(nil, "%08d|", i), bytes.Repeat([]byte{'x'}, r.IntN(200))...)
		out[i] = kv{k, v}
	}
	return out
}

func TestSortMatchesStableSort(t *testing.T) {
	cases := []struct {
		name   string
		n      int
		memory int64
		fanIn  int
		spills bool
	}{
		{"empty", 0, 1 << 20, 0, false},
		{"in memory", 2000, 64 << 20, 0, false},
		{"spills", 20000, 256 << 10, 0, true},
		{"several merge passes", 20000, 100 << 10, 3, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := randomEntries(tc.n, uint64(tc.n))
			s := New(Options{Memory: tc.memory, TmpDir: t.TempDir(), MaxFanIn: tc.fanIn})
			for _, e := range in {
				if err := s.Add(e.k, e.v); err != nil {
					t.Fatal(err)
				}
			}
			it, err := s.Finish(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(in)
			slices.SortStableFunc(want, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
			i := 0
			for it.Next() {
				if i >= len(want) {
					t.Fatalf("more entries than added")
				}
				if !bytes.Equal(it.Key(), want[i].k) || !bytes.Equal(it.Value(), want[i].v) {
					t.Fatalf("entry %d: got %q=%.12q, want %q=%.12q", i, it.Key(), it.Value(), want[i].k, want[i].v)
				}
				i++
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			if i != len(want) {
				t.Fatalf("got %d entries, want %d", i, len(want))
			}
			if got := s.Stats().Runs > 0; got != tc.spills {
				t.Fatalf("spilled = %v, want %v (stats %+v)", got, tc.spills, s.Stats())
			}
			if tc.spills && s.Stats().PeakMemory > tc.memory+int64(s.chunkSize) {
				t.Fatalf("peak memory %d above budget %d plus one chunk", s.Stats().PeakMemory, tc.memory)
			}
			dir := s.SpillDir()
			it.Close()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if dir != "" {
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("spill directory %s left behind", dir)
				}
			}
		})
	}
}

func TestCancelStopsMerge(t *testing.T) {
	s := New(Options{Memory: 64 << 10, TmpDir: t.TempDir()})
	defer s.Close()
	for _, e := range randomEntries(200000, 3) {
		if err := s.Add(e.k, e.v); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	it, err := s.Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	cancel()
	n := 0
	for it.Next() {
		n++
	}
	if !errors.Is(it.Err(), context.Canceled) || n >= 200000 {
		t.Fatalf("after cancel: err %v after %d entries", it.Err(), n)
	}
}

func TestLargeEntryLargerThanChunk(t *testing.T) {
	s := New(Options{Memory: 1 << 20, TmpDir: t.TempDir()})
	defer s.Close()
	big := bytes.Repeat([]byte{'b'}, 3<<20)
	for _, k := range []string{"c", "a", "b"} {
		if err := s.Add([]byte(k), big); err != nil {
			t.Fatal(err)
		}
	}
	it, err := s.Finish(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []string
	for it.Next() {
		if len(it.Value()) != len(big) {
			t.Fatalf("value of %q has %d bytes", it.Key(), len(it.Value()))
		}
		got = append(got, string(it.Key()))
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("got %v", got)
	}
}

func BenchmarkSortSpill(b *testing.B) {
	in := randomEntries(100000, 1)
	b.ReportAllocs()
	for b.Loop() {
		s := New(Options{Memory: 2 << 20, TmpDir: b.TempDir()})
		for _, e := range in {
			s.Add(e.k, e.v)
		}
		it, _ := s.Finish(context.Background())
		for it.Next() {
		}
		it.Close()
		s.Close()
	}
}

// A spill run read back in place (entries within the read buffer) or
// copied (larger ones) gives exactly what was written; a run cut anywhere
// gives the entries before the cut and then an error, unless the cut falls
// between two entries.
func TestRunReadBackAndTruncation(t *testing.T) {
	dir := t.TempDir()
	entries := []kv{
		{[]byte("a"), []byte("1")},
		{[]byte(""), []byte("")},
		{bytes.Repeat([]byte{'k'}, 200), bytes.Repeat([]byte{'v'}, 300)}, // above a 128-byte header varint
		{[]byte("big"), bytes.Repeat([]byte{'B'}, 3000)},                 // larger than the read buffer
		{[]byte("z"), []byte("last")},
	}
	p := dir + "/run"
	n, err := writeRun(nil, p, len(entries), func(i int) ([]byte, []byte) { return entries[i].k, entries[i].v })
	if err != nil {
		t.Fatal(err)
	}
	full, _ := os.ReadFile(p)
	if int64(len(full)) != n {
		t.Fatalf("writeRun says %d bytes, file has %d", n, len(full))
	}
	// Entry boundaries, to tell a clean cut from a damaged one.
	ends := map[int]int{0: 0}
	off := 0
	for i, e := range entries {
		off += len(binary.AppendUvarint(nil, uint64(len(e.k)))) + len(binary.AppendUvarint(nil, uint64(len(e.v)))) + len(e.k) + len(e.v)
		ends[off] = i + 1
	}
	for cut := 0; cut <= len(full); cut++ {
		q := fmt.Sprintf("%s/cut-%d", dir, cut)
		if err := os.WriteFile(q, full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := openRun(nil, q, 0, 1024)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		var rerr error
		for {
			ok, err := r.next()
			if err != nil {
				rerr = err
				break
			}
			if !ok {
				break
			}
			if !bytes.Equal(r.key(), entries[got].k) || !bytes.Equal(r.value(), entries[got].v) {
				t.Fatalf("cut %d: entry %d differs", cut, got)
			}
			got++
		}
		r.close()
		if want, clean := ends[cut]; clean {
			if rerr != nil || got != want {
				t.Fatalf("cut %d at an entry boundary: %d entries, err %v; want %d, nil", cut, got, rerr, want)
			}
		} else if rerr == nil {
			t.Fatalf("cut %d inside an entry: %d entries and no error", cut, got)
		}
		os.Remove(q)
	}
}

// radixPrefix orders by (pfx, rest) exactly as the comparison it replaces,
// and permutes (loses or duplicates nothing), on prefixes that share
// leading bytes, differ only in a middle byte, or are all equal.
func TestRadixPrefixOrdersLikeComparison(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	gens := map[string]func(i int) uint64{
		"random":       func(int) uint64 { return r.Uint64() },
		"shared high":  func(int) uint64 { return 0xabcd<<48 | uint64(r.IntN(1000))<<16 },
		"middle byte":  func(int) uint64 { return 7<<56 | uint64(r.IntN(3))<<24 },
		"all equal":    func(int) uint64 { return 42 },
		"one shared":   func(int) uint64 { return 5<<56 | uint64(r.IntN(200))<<48 | uint64(r.IntN(200))<<40 },
		"few distinct": func(int) uint64 { return uint64(r.IntN(4)) << (8 * uint(r.IntN(8))) },
	}
	rest := func(e entry) uint32 { return e.klen }
	for name, gen := range gens {
		for _, n := range []int{0, 1, radixMin - 1, radixMin, 5000} {
			idx := make([]entry, n)
			for i := range idx {
				idx[i] = entry{off: uint32(i), klen: uint32(r.IntN(10)), pfx: gen(i)}
			}
			want := slices.Clone(idx)
			byKey := func(a, b entry) int {
				if a.pfx != b.pfx {
					return cmp.Compare(a.pfx, b.pfx)
				}
				return cmp.Compare(rest(a), rest(b))
			}
			slices.SortStableFunc(want, byKey)
			radixPrefix(idx, 0, rest)
			for i := range idx {
				if byKey(idx[i], want[i]) != 0 {
					t.Fatalf("%s, n=%d: entry %d is (%x, %d), want (%x, %d)", name, n, i, idx[i].pfx, rest(idx[i]), want[i].pfx, rest(want[i]))
				}
			}
			seen := make([]bool, n)
			for _, e := range idx {
				if seen[e.off] {
					t.Fatalf("%s, n=%d: entry %d twice", name, n, e.off)
				}
				seen[e.off] = true
			}
		}
	}
}
