package dataset

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Bounds import holds its input to, so that a run stays within --memory
// (plus plan.FixedOverhead) whatever the input claims. Both are shares of
// --memory: raising --memory raises them.
const (
	// RowMemoryShare: one row (key, sub-key and value) may take at most
	// 1/16 of --memory. The sort holds whole rows, and the reader holds
	// the page a row came from: a 15 MiB key at --memory 32MiB took
	// 453 MB.
	RowMemoryShare = 16
	// FooterMemoryShare: a Parquet footer may take at most 1/32 of
	// --memory (and never less than MinFooterLimit). A footer decodes
	// into about 20 times its size before a row is read: one listing
	// 100,000 row groups (29 MB) took 636 MB at --memory 32MiB.
	FooterMemoryShare = 32
	MinFooterLimit    = 1 << 20
)

func importMemory(memory int64) int64 {
	if memory <= 0 {
		return plan.DefaultMemory()
	}
	return memory
}

// RowLimit is the largest row import takes at a memory budget.
func RowLimit(memory int64) int64 { return importMemory(memory) / RowMemoryShare }

// FooterLimit is the largest Parquet footer import decodes at a memory
// budget.
func FooterLimit(memory int64) int64 {
	return max(MinFooterLimit, importMemory(memory)/FooterMemoryShare)
}

// checkRowSize refuses a row larger than RowLimit, naming it and the
// --memory that would take it.
func checkRowSize(where func() string, key, subKey, value int, memory int64) error {
	n := int64(key) + int64(subKey) + int64(value)
	limit := RowLimit(memory)
	if n <= limit {
		return nil
	}
	return fmt.Errorf("%w: %s: a row of %s (key %s, sub-key %s, value %s) is over the %s one row may take at --memory %s (1/%d of it); raise --memory to at least %s",
		snapshotfmt.ErrTooLarge, where(), units.Bytes(n), units.Bytes(int64(key)), units.Bytes(int64(subKey)), units.Bytes(int64(value)),
		units.Bytes(limit), units.Bytes(importMemory(memory)), RowMemoryShare, units.Bytes(n*RowMemoryShare))
}

// checkParquetFooter reads a Parquet file's footer before the Parquet
// library does: a footer over FooterLimit is refused unread, and every
// column chunk it lists must lie in the file's data, apart from every
// other chunk. A footer whose row groups all point at one chunk made the
// reader decode and re-read that chunk 100,000 times (182 s). A path that
// is not a regular Parquet file is left for openPart to report.
func checkParquetFooter(path string, memory int64) error {
	// O_NONBLOCK: a FIFO must not hang the open (openPart refuses it).
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	size := st.Size()
	var head [4]byte
	if size < 12 {
		return nil
	}
	if _, err := f.ReadAt(head[:], 0); err != nil || string(head[:]) != "PAR1" {
		return nil
	}
	var tail [8]byte
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return fmt.Errorf("%s: read the Parquet footer: %w", path, err)
	}
	if string(tail[4:]) != "PAR1" {
		return fmt.Errorf("%w: %s: no Parquet footer (the file does not end in PAR1): truncated?", snapshotfmt.ErrCorrupt, path)
	}
	flen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if flen > size-12 {
		return fmt.Errorf("%w: %s: the footer claims %d bytes, the file has %d", snapshotfmt.ErrCorrupt, path, flen, size)
	}
	if limit := FooterLimit(memory); flen > limit {
		return fmt.Errorf("%w: %s: its Parquet footer is %s, over the %s import decodes at --memory %s (1/%d of it); raise --memory to at least %s, or rewrite the file with fewer, larger row groups",
			snapshotfmt.ErrTooLarge, path, units.Bytes(flen), units.Bytes(limit), units.Bytes(importMemory(memory)), FooterMemoryShare, units.Bytes(flen*FooterMemoryShare))
	}
	footer := make([]byte, flen)
	if _, err := f.ReadAt(footer, size-8-flen); err != nil && err != io.EOF {
		return fmt.Errorf("%s: read the Parquet footer: %w", path, err)
	}
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), footer, &md); err != nil {
		return fmt.Errorf("%w: %s: the Parquet footer does not decode: %v", snapshotfmt.ErrCorrupt, path, err)
	}
	return checkChunks(path, &md, size-8-flen)
}

// checkChunks requires every column chunk to lie in [4, dataEnd) and no
// two to share a byte: a reader then reads each byte of the file at most
// once, whatever the footer lists.
func checkChunks(path string, md *format.FileMetaData, dataEnd int64) error {
	type span struct {
		lo, hi  int64
		rg, col int
	}
	var spans []span
	for i := range md.RowGroups {
		rg := &md.RowGroups[i]
		for j := range rg.Columns {
			cm := &rg.Columns[j].MetaData
			lo := cm.DataPageOffset
			if cm.DictionaryPageOffset > 0 && cm.DictionaryPageOffset < lo {
				lo = cm.DictionaryPageOffset
			}
			hi := lo + cm.TotalCompressedSize
			if lo < 4 || cm.TotalCompressedSize < 0 || hi < lo || hi > dataEnd {
				return fmt.Errorf("%w: %s: row group %d, column %d: its chunk claims bytes %d..%d, outside the file's data (4..%d)", snapshotfmt.ErrCorrupt, path, i, j, lo, hi, dataEnd)
			}
			spans = append(spans, span{lo, hi, i, j})
		}
	}
	slices.SortFunc(spans, func(a, b span) int {
		switch {
		case a.lo != b.lo:
			return cmpInt64(a.lo, b.lo)
		case a.hi != b.hi:
			return cmpInt64(a.hi, b.hi)
		case a.rg != b.rg:
			return a.rg - b.rg
		}
		return a.col - b.col
	})
	for k := 1; k < len(spans); k++ {
		if a, b := spans[k-1], spans[k]; b.lo < a.hi {
			return fmt.Errorf("%w: %s: row group %d column %d and row group %d column %d claim the same bytes (%d..%d and %d..%d): a footer lists each chunk once", snapshotfmt.ErrCorrupt, path, a.rg, a.col, b.rg, b.col, a.lo, a.hi, b.lo, b.hi)
		}
	}
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
