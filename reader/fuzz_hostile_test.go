package reader_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Table mutations of FuzzOpenFile.
const (
	tableXor      = iota // xor one byte
	tableTruncate        // cut the table at an offset
	tableSplice          // overwrite bytes at an offset with the payload
	tableReplace         // the payload is the whole table
	tableModes
)

// FuzzOpenFile reads tables that are damaged and then resealed: the size
// and whole-file checksum in the manifest are recomputed, so the bytes
// reach Pebble's table reader through reader.OpenFile. It must return an
// error that wraps ErrCorrupt (or read entries that the file iterator's own
// checks accept), never panic, hang, or allocate beyond the file.
func FuzzOpenFile(f *testing.F) {
	f.Add(uint8(tableXor), uint8(0), uint32(100), uint8(0x01), []byte(nil))
	f.Add(uint8(tableXor), uint8(1), uint32(1<<20), uint8(0xff), []byte(nil))
	f.Add(uint8(tableTruncate), uint8(2), uint32(60), uint8(0), []byte(nil))
	// A block handle at the footer claiming a huge length.
	f.Add(uint8(tableSplice), uint8(0), uint32(0xffffff00), uint8(0), []byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(uint8(tableSplice), uint8(0), uint32(0xffffffc0), uint8(0), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Add(uint8(tableReplace), uint8(0), uint32(0), uint8(0), []byte("not a table"))
	seeds, _ := filepath.Glob(filepath.Join("testdata", "tables", "*.sst"))
	for _, p := range seeds {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(uint8(tableReplace), uint8(0), uint32(0), uint8(0), data)
		}
	}
	template := filepath.Join(f.TempDir(), "template")
	if _, err := fixtures.Generate(context.Background(), template, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		f.Fatal(err)
	}
	base := readManifestFile(f, template)
	tables := map[string][]byte{}
	for _, df := range base.Files {
		data, err := os.ReadFile(filepath.Join(template, filepath.FromSlash(df.Path)))
		if err != nil {
			f.Fatal(err)
		}
		tables[df.Path] = data
	}
	f.Fuzz(func(t *testing.T, mode, file uint8, off uint32, xor uint8, payload []byte) {
		// Only the manifest and the one table read need to exist.
		dir := t.TempDir()
		m := readManifestFile(t, template)
		k := int(file) % len(m.Files)
		df := &m.Files[k]
		p := filepath.Join(dir, filepath.FromSlash(df.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data := append([]byte(nil), tables[df.Path]...)
		// Offsets count from the end when the top bit is set: the footer
		// and index live there.
		at := int(off & 0x7fffffff)
		if off&0x80000000 != 0 {
			at = len(data) - 1 - int(^off&0x7fffffff)%len(data)
		}
		at = ((at % len(data)) + len(data)) % len(data)
		switch mode % tableModes {
		case tableXor:
			data[at] ^= max(xor, 1)
		case tableTruncate:
			data = data[:at]
		case tableSplice:
			data = append(data[:at:at], append(payload, data[min(len(data), at+len(payload)):]...)...)
		case tableReplace:
			data = payload
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		df.Size = int64(len(data))
		df.Checksum = snapshotfmt.Checksum(data)
		writeManifestFile(t, dir, m)

		s, err := reader.Open(dir, reader.Options{})
		if err != nil {
			t.Fatalf("the resealed manifest is refused: %v", err)
		}
		fi, err := s.OpenFile(context.Background(), s.Manifest().Files[k], nil, nil)
		if err != nil {
			if !errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		n := 0
		for fi.Next() {
			n++
		}
		err = fi.Err()
		fi.Close()
		if err != nil && !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Fatalf("unclassified error: %v", err)
		}
		if err == nil && uint64(n) != df.Entries {
			t.Fatalf("read %d entries without error, the manifest says %d", n, df.Entries)
		}
	})
}

func readManifestFile(t testing.TB, dir string) *snapshotfmt.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, snapshotfmt.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := snapshotfmt.DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func writeManifestFile(t testing.TB, dir string, m *snapshotfmt.Manifest) {
	t.Helper()
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, snapshotfmt.ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
