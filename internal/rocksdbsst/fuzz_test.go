package rocksdbsst

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
)

// FuzzOpenIter opens arbitrary bytes as a table and reads everything: no
// panic, no unbounded allocation, and every error is ErrCorrupt or
// ErrUnsupported. The first byte chooses whether block checksums are
// checked; unchecked, mutations reach the block and compression decoders.
func FuzzOpenIter(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.sst")
	multi, _ := filepath.Glob("testdata/multi/*.sst")
	spark, _ := filepath.Glob(sparkDir + "/checkpoint/state/0/0/SSTs/*.sst")
	for _, p := range append(append(seeds, multi...), spark...) {
		b := mustRead(f, p)
		f.Add(append([]byte{0}, b...))
		f.Add(append([]byte{1}, b...))
	}
	old := maxBlockSize
	maxBlockSize = 1 << 22
	defer func() { maxBlockSize = old }()
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		verify, b := in[0]&1 == 0, in[1:]
		check := func(err error) {
			if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrUnsupported", err)
			}
		}
		tb, err := open(bytes.NewReader(b), int64(len(b)), verify)
		check(err)
		if err != nil {
			return
		}
		it := tb.NewIter()
		for it.Next() {
			_ = it.Key()
			_ = it.Value()
		}
		check(it.Err())
		_, err = tb.RangeDeletions()
		check(err)
		check(Live([]*Table{tb, tb}, StringAppend([]byte(",")), func(k, v []byte) error { return nil }))
	})
}
