package rocksdbsst

import (
	"archive/zip"
	"bufio"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sparkDir = "../../engine/spark/testdata/interop/rocksdb"

func openFile(t testing.TB, path string) *Table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Open(f, st.Size())
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return tb
}

// sparkZipMetadata reads the metadata file of a RocksDB state store zip:
// a "v1" line, then JSON.
type sparkMeta struct {
	SstFiles []struct {
		DfsSstFileName string `json:"dfsSstFileName"`
	} `json:"sstFiles"`
	NumKeys int `json:"numKeys"`
}

func readSparkMeta(t *testing.T, zipPath string) sparkMeta {
	t.Helper()
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name != "metadata" {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		s := strings.TrimPrefix(string(b), "v1\n")
		var m sparkMeta
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	t.Fatalf("%s has no metadata", zipPath)
	return sparkMeta{}
}

// unsafeRowString decodes field 0 of a one-string-column UnsafeRow (null
// bitset word, then the (offset<<32 | size) slot).
func unsafeRowString(t *testing.T, row []byte) string {
	t.Helper()
	if len(row) < 16 {
		t.Fatalf("key row of %d bytes", len(row))
	}
	slot := binary.LittleEndian.Uint64(row[8:])
	off, size := slot>>32, slot&0xffffffff
	if off+size > uint64(len(row)) {
		t.Fatalf("key row slot %x outside %d bytes", slot, len(row))
	}
	return string(row[off : off+size])
}

// TestSparkStateStore reads the SST files Spark's RocksDB state store
// provider wrote (format_version 5, LZ4, XXH3) and checks the live rows of
// the newest version of each partition against Spark's own statestore
// reader (expected_state.jsonl) and the numKeys Spark recorded.
func TestSparkStateStore(t *testing.T) {
	want := map[int]map[string]int64{}
	f, err := os.Open(filepath.Join(sparkDir, "expected_state.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row struct {
			Partition int `json:"partition_id"`
			Key       struct {
				K string `json:"k"`
			} `json:"key"`
			Value struct {
				Count int64 `json:"count"`
			} `json:"value"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		if want[row.Partition] == nil {
			want[row.Partition] = map[string]int64{}
		}
		want[row.Partition][row.Key.K] = row.Value.Count
	}
	for _, part := range []int{0, 1} {
		dir := filepath.Join(sparkDir, "checkpoint/state/0", string(rune('0'+part)))
		meta := readSparkMeta(t, filepath.Join(dir, "3.zip"))
		if len(meta.SstFiles) != 3 {
			t.Fatalf("partition %d: %d SST files in 3.zip", part, len(meta.SstFiles))
		}
		var tables []*Table
		for _, s := range meta.SstFiles {
			tb := openFile(t, filepath.Join(dir, "SSTs", s.DfsSstFileName))
			p := tb.Properties()
			if p.FormatVersion != 5 || p.ChecksumType != ChecksumXXH3 || p.Compression != "LZ4" ||
				p.Comparator != BytewiseComparator || p.MergeOperator != "StringAppendOperator" || p.ColumnFamilyName != "default" {
				t.Errorf("%s: properties %+v", s.DfsSstFileName, p)
			}
			var n uint64
			it := tb.NewIter()
			for it.Next() {
				if it.Key().Kind != KindValue || len(it.Key().UserKey) == 0 || it.Key().UserKey[0] != 0 {
					t.Errorf("%s: entry %+v", s.DfsSstFileName, it.Key())
				}
				n++
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			if n != p.NumEntries || n == 0 {
				t.Errorf("%s: iterated %d entries, properties say %d", s.DfsSstFileName, n, p.NumEntries)
			}
			tables = append(tables, tb)
		}
		got := map[string]int64{}
		var prev []byte
		err := Live(tables, StringAppend([]byte(",")), func(key, value []byte) error {
			if prev != nil && string(prev) >= string(key) {
				t.Errorf("keys out of order: %x then %x", prev, key)
			}
			prev = append(prev[:0], key...)
			k := unsafeRowString(t, key[1:]) // key and value carry a 1-byte encoding version
			if len(value) != 17 {
				t.Fatalf("value %x", value)
			}
			got[k] = int64(binary.LittleEndian.Uint64(value[9:]))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != meta.NumKeys {
			t.Errorf("partition %d: %d live keys, Spark's metadata says %d", part, len(got), meta.NumKeys)
		}
		if len(got) != len(want[part]) {
			t.Errorf("partition %d: %d live keys, statestore reader %d", part, len(got), len(want[part]))
		}
		for k, c := range want[part] {
			if got[k] != c {
				t.Errorf("partition %d key %q: count %d, want %d", part, k, got[k], c)
			}
		}
	}
}
