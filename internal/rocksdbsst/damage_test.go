package rocksdbsst

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openBytes(b []byte) (*Table, error) { return Open(bytes.NewReader(b), int64(len(b))) }

// readAll opens b and reads every entry, range tombstone and the live view,
// returning the first error.
func readAll(b []byte) error {
	tb, err := openBytes(b)
	if err != nil {
		return err
	}
	it := tb.NewIter()
	for it.Next() {
	}
	if err := it.Err(); err != nil {
		return err
	}
	if _, err := tb.RangeDeletions(); err != nil {
		return err
	}
	return Live([]*Table{tb}, StringAppend([]byte(",")), func(k, v []byte) error { return nil })
}

// fixChecksum rewrites the stored checksum of the block at h after a test
// changed it, so the change reaches the decoder behind the checksum.
func fixChecksum(tb *Table, b []byte, h blockHandle) {
	end := h.offset + h.size
	sum := builtinChecksum(tb.footer.checksum, b[h.offset:end+1]) + contextModifier(tb.footer.baseContext, h.offset)
	binary.LittleEndian.PutUint32(b[end+1:], sum)
}

func flip(b []byte, off uint64) []byte {
	c := bytes.Clone(b)
	c[off] ^= 0x55
	return c
}

// TestDamaged checks that damaged tables give a clear ErrCorrupt (or
// ErrUnsupported for valid features this reader refuses), never a panic and
// never silently wrong rows.
func TestDamaged(t *testing.T) {
	for _, name := range []string{"v5-xxh3-lz4", "v6-xxh3-zstd", "v2-crc32c-none", "v5-xxh3-lz4-partitioned"} {
		orig := mustRead(t, filepath.Join("testdata", name+".sst"))
		tb, err := openBytes(orig)
		if err != nil {
			t.Fatal(err)
		}
		index := tb.footer.index
		if index == (blockHandle{}) {
			index = tb.meta[indexBlockName]
		}
		props := tb.meta[propertiesBlockName]
		data := tb.dataBlocks[len(tb.dataBlocks)/2]
		size := uint64(len(orig))
		withVersion := func(v uint32) []byte {
			c := bytes.Clone(orig)
			binary.LittleEndian.PutUint32(c[size-12:], v)
			return c
		}
		// changedBlock rewrites the block at h (its contents, or its
		// compression type when comp >= 0) with a valid checksum.
		changedBlock := func(h blockHandle, edit func(block []byte), comp int) []byte {
			c := bytes.Clone(orig)
			if edit != nil {
				edit(c[h.offset : h.offset+h.size])
			}
			if comp >= 0 {
				c[h.offset+h.size] = byte(comp)
			}
			fixChecksum(tb, c, h)
			return c
		}
		cases := []struct {
			name string
			b    []byte
			want error
		}{
			{"empty", nil, ErrCorrupt},
			{"10 bytes", orig[:10], ErrCorrupt},
			{"footer only minus one", orig[size-footerLen+1:], ErrCorrupt},
			{"truncated by one", orig[:size-1], ErrCorrupt},
			{"half", orig[:size/2], ErrCorrupt},
			{"last data block cut", orig[:data.offset+3], ErrCorrupt},
			{"wrong magic", flip(orig, size-1), ErrCorrupt},
			{"legacy magic", append(bytes.Clone(orig[:size-8]), 0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb), ErrUnsupported},
			{"plain table magic", append(bytes.Clone(orig[:size-8]), 0x64, 0x95, 0xbf, 0x63, 0x96, 0x22, 0x42, 0x82), ErrUnsupported},
			{"format_version 9", withVersion(9), ErrUnsupported},
			{"format_version 1", withVersion(1), ErrUnsupported},
			{"format_version garbage", withVersion(0x12345678), ErrCorrupt},
			{"checksum type 9", func() []byte { c := bytes.Clone(orig); c[size-footerLen] = 9; return c }(), ErrCorrupt},
			{"footer byte 3", flip(orig, size-footerLen+3), ErrCorrupt},
			{"index block", flip(orig, index.offset+index.size/2), ErrCorrupt},
			{"index checksum", flip(orig, index.offset+index.size+2), ErrCorrupt},
			{"properties block", flip(orig, props.offset+3), ErrCorrupt},
			{"metaindex block", flip(orig, tb.footer.metaindex.offset+1), ErrCorrupt},
			{"data block", flip(orig, data.offset+data.size/2), ErrCorrupt},
			{"data block compression type", flip(orig, data.offset+data.size), ErrCorrupt},
			{"data block, checksum fixed: xpress", changedBlock(data, nil, compXpress), ErrUnsupported},
			{"data block, checksum fixed: custom compression", changedBlock(data, nil, 0x88), ErrUnsupported},
			{"data block, checksum fixed: restart count", changedBlock(data, func(b []byte) { b[len(b)-2] = 0x7f }, -1), ErrCorrupt},
			{"data block, checksum fixed: separated kv bit", changedBlock(data, func(b []byte) { b[len(b)-1] |= 0x10 }, -1), nil},
			{"index block, checksum fixed: garbage", changedBlock(index, func(b []byte) { copy(b, bytes.Repeat([]byte{0xff}, len(b)-4)) }, -1), ErrCorrupt},
		}
		if tb.footer.formatVersion >= 6 {
			// Reserved bytes: unchecked padding before version 6, covered
			// by the footer checksum since.
			cases = append(cases, struct {
				name string
				b    []byte
				want error
			}{"footer reserved byte", flip(orig, size-footerLen+20), ErrCorrupt})
		}
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				err := readAll(c.b)
				if err == nil {
					t.Fatal("read a damaged table without error")
				}
				if c.want != nil && !errors.Is(err, c.want) {
					t.Fatalf("error %v, want %v", err, c.want)
				}
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
					t.Fatalf("error %v is neither ErrCorrupt nor ErrUnsupported", err)
				}
				t.Log(err)
			})
		}
	}
}

// TestRefusedComparator rewrites the comparator property of an uncompressed
// table (checksum fixed) to RocksDB's reverse comparator: Open must refuse it.
func TestRefusedComparator(t *testing.T) {
	orig := mustRead(t, "testdata/v6-crc32c-none.sst")
	tb, err := openBytes(orig)
	if err != nil {
		t.Fatal(err)
	}
	h := tb.meta[propertiesBlockName]
	c := bytes.Clone(orig)
	blk := c[h.offset : h.offset+h.size]
	i := bytes.Index(blk, []byte("leveldb.BytewiseComparator"))
	if i < 0 || c[h.offset+h.size] != compNone {
		t.Fatal("comparator not found in an uncompressed properties block")
	}
	copy(blk[i:], "leveldb.BytewiseComparatoX")
	fixChecksum(tb, c, h)
	_, err = openBytes(c)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("error %v, want ErrUnsupported", err)
	}
}
