package spark

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/internal/lz4java"
)

func twsSchemaFile(t testing.TB) []byte {
	fs, _ := filepath.Glob(filepath.Join(sharedCheckpoints, "tws", "checkpoint", "state", "0", "_stateSchema", "default", "0_*"))
	if len(fs) == 0 {
		t.Fatal("no tws schema file")
	}
	b, err := os.ReadFile(fs[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The v3 state schema file (transformWithState's column families).
func FuzzSchemaV3(f *testing.F) {
	b := twsSchemaFile(f)
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte("\x00\x02v3\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfs, err := parseSchemaV3(b)
		if err != nil {
			if !isFormatErr(err) {
				t.Fatalf("%v", err)
			}
			return
		}
		g, err := groupingKey(cfs)
		if err != nil {
			if !isFormatErr(err) {
				t.Fatalf("%v", err)
			}
			return
		}
		for _, cf := range cfs {
			if err := cf.locate(g); err != nil && !isFormatErr(err) {
				t.Fatalf("%v", err)
			}
		}
	})
}

// A stored key of a transformWithState store: the family id and the
// family's key layout, hashed as its grouping key.
func FuzzTWSKeyHash(f *testing.F) {
	c, err := Open(filepath.Join(sharedCheckpoints, "tws", "checkpoint"))
	if err != nil {
		f.Fatal(err)
	}
	s := c.Operators[0].Stores[0]
	n := 0
	c.ForEachRow(f.Context(), func(r Row) error {
		if n < 40 {
			f.Add(bytes.Clone(r.Key))
		}
		n++
		return nil
	})
	f.Fuzz(func(t *testing.T, k []byte) {
		if _, err := s.TWS.hash(k); err != nil && !isFormatErr(err) {
			t.Fatalf("%v", err)
		}
	})
}

// Changelogs v1 and v2, decompressed (the lz4-java framing has its own
// fuzzer in internal/lz4java).
func FuzzChangelogRecords(f *testing.F) {
	for _, p := range []string{
		filepath.Join(sharedCheckpoints, "tws_rocksdb_changelog", "checkpoint", "state", "0", "0", "2.changelog"),
		filepath.Join(sharedCheckpoints, "agg_string_rocksdb_changelog", "checkpoint", "state", "0", "0", "2.changelog"),
	} {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var plain bytes.Buffer
		if _, err := plain.ReadFrom(lz4java.NewReader(bytes.NewReader(raw))); err != nil {
			f.Fatal(err)
		}
		f.Add(plain.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "1.changelog")
		var z bytes.Buffer
		w := lz4java.NewWriter(&z, 0)
		w.Write(b)
		w.Close()
		if err := os.WriteFile(path, z.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		err := readChangelog(path, func(op changeOp, k, v []byte) error { return nil })
		if err != nil && !isFormatErr(err) {
			t.Fatalf("%v", err)
		}
		// and straight from memory, without the file
		if len(b) > 4 && bytes.HasPrefix(b, changelogV2Header) {
			err := readChangelogV2(bufio.NewReader(bytes.NewReader(b[4:])), func(op changeOp, k, v []byte) error { return nil })
			if err != nil && !isFormatErr(err) {
				t.Fatalf("%v", err)
			}
		}
	})
}
