package rocksdbsst

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"sync"
	"testing"
)

func TestStringAppend(t *testing.T) {
	for _, c := range []struct {
		name    string
		base    string
		hasBase bool
		ops     []string
		want    string
	}{
		{"no base", "", false, []string{"a", "b"}, "a,b"},
		{"base", "x", true, []string{"a", "b"}, "x,a,b"},
		{"empty base counts", "", true, []string{"a"}, ",a"},
		{"one operand", "", false, []string{"a"}, "a"},
		{"empty operands", "", false, []string{"", ""}, ","},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ops [][]byte
			for _, o := range c.ops {
				ops = append(ops, []byte(o))
			}
			got, err := StringAppend([]byte(","))(nil, []byte(c.base), c.hasBase, ops)
			if err != nil || string(got) != c.want {
				t.Errorf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestLiveErrors: merge operands without a merge function are refused, and
// errors of the merge function and of fn stop Live and come back.
func TestLiveErrors(t *testing.T) {
	files, _ := filepath.Glob("testdata/multi/*.sst")
	var tables []*Table
	for _, f := range files {
		tables = append(tables, openFile(t, f))
	}
	if err := Live(tables, nil, func(k, v []byte) error { return nil }); !errors.Is(err, ErrUnsupported) {
		t.Errorf("nil merge: %v", err)
	}
	boom := errors.New("boom")
	failing := func([]byte, []byte, bool, [][]byte) ([]byte, error) { return nil, boom }
	if err := Live(tables, failing, func(k, v []byte) error { return nil }); !errors.Is(err, boom) {
		t.Errorf("failing merge: %v", err)
	}
	n := 0
	err := Live(tables, StringAppend([]byte(",")), func(k, v []byte) error {
		n++
		if n == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || n != 3 {
		t.Errorf("fn error: %v after %d calls", err, n)
	}
	if err := Live(nil, nil, func(k, v []byte) error { return boom }); err != nil {
		t.Errorf("no tables: %v", err)
	}
}

// countingReader records the largest single read.
type countingReader struct {
	r   io.ReaderAt
	mu  sync.Mutex
	max int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	c.max = max(c.max, len(p))
	c.mu.Unlock()
	return c.r.ReadAt(p, off)
}

// TestIterReadsBlockByBlock: Open and the iterator read one block at a time,
// never the whole file.
func TestIterReadsBlockByBlock(t *testing.T) {
	b := mustRead(t, "testdata/v5-xxh3-lz4.sst")
	cr := &countingReader{r: bytes.NewReader(b)}
	tb, err := Open(cr, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	it := tb.NewIter()
	for it.Next() {
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	// The properties block (~1 KB) is the largest; the file is ~7 KB.
	if cr.max > 1100 || cr.max*4 > len(b) {
		t.Errorf("largest read %d bytes of a %d-byte file", cr.max, len(b))
	}
}

// TestConcurrentIters: iterators of one table are independent.
func TestConcurrentIters(t *testing.T) {
	tb := openFile(t, "testdata/v6-xxh3-zstd.sst")
	want := tb.Properties().NumEntries - tb.Properties().NumRangeDeletions
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it := tb.NewIter()
			var n uint64
			for it.Next() {
				n++
			}
			if it.Err() != nil || n != want {
				t.Errorf("%d entries, %v", n, it.Err())
			}
		}()
	}
	wg.Wait()
}

// TestFragment checks the tombstone sweep against the definition (the highest
// sequence number of a tombstone covering the key) on overlapping ranges.
func TestFragment(t *testing.T) {
	ts := []RangeTombstone{
		{[]byte("b"), []byte("f"), 5},
		{[]byte("c"), []byte("d"), 9},
		{[]byte("a"), []byte("z"), 2},
		{[]byte("e"), []byte("g"), 7},
		{[]byte("x"), []byte("x"), 99}, // empty
		{[]byte("m"), []byte("n"), 1},
	}
	f := fragment(ts)
	for _, k := range []string{"", "a", "b", "bb", "c", "cz", "d", "e", "f", "g", "m", "mm", "n", "x", "y", "z", "zz"} {
		var want uint64
		for _, r := range ts {
			if bytes.Compare(r.Start, []byte(k)) <= 0 && bytes.Compare([]byte(k), r.End) < 0 {
				want = max(want, r.Seq)
			}
		}
		if got := f.cover([]byte(k)); got != want {
			t.Errorf("cover(%q) = %d, want %d", k, got, want)
		}
	}
}
