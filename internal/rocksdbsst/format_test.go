package rocksdbsst

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// formatVectors returns the ```hex blocks of FORMAT.md: name -> (offset, bytes).
func formatVectors(t *testing.T) map[string]struct {
	off int
	b   []byte
} {
	doc, err := os.ReadFile("FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]struct {
		off int
		b   []byte
	}{}
	parts := strings.Split(string(doc), "```hex ")
	for _, p := range parts[1:] {
		head, body, _ := strings.Cut(p, "\n")
		body, _, _ = strings.Cut(body, "```")
		f := strings.Fields(head)
		off, err1 := strconv.Atoi(f[1])
		b, err2 := hex.DecodeString(strings.Join(strings.Fields(body), ""))
		if len(f) != 2 || err1 != nil || err2 != nil {
			t.Fatalf("FORMAT.md vector %q", head)
		}
		out[f[0]] = struct {
			off int
			b   []byte
		}{off, b}
	}
	return out
}

// TestFormatVector keeps FORMAT.md's test vector true: the bytes are those of
// the Spark table, and they decode to what the document says.
func TestFormatVector(t *testing.T) {
	file := mustRead(t, filepath.Join(sparkDir, "checkpoint/state/0/0/SSTs/000008-f637cf96-a0be-49f7-90fe-af74d8435b39.sst"))
	v := formatVectors(t)
	ft, ix := v["footer"], v["index"]
	if len(ft.b) != footerLen || len(ix.b) != 43 {
		t.Fatalf("vectors of %d and %d bytes", len(ft.b), len(ix.b))
	}
	for name, x := range v {
		if !bytes.Equal(file[x.off:x.off+len(x.b)], x.b) {
			t.Errorf("FORMAT.md %s vector differs from the file at %d", name, x.off)
		}
	}
	f, err := decodeFooter(ft.b, int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if f.checksum != ChecksumXXH3 || f.formatVersion != 5 || f.metaindex != (blockHandle{2154, 81}) || f.index != (blockHandle{1174, 38}) || f.offset != uint64(ft.off) {
		t.Errorf("footer %+v", f)
	}
	blk := ix.b[:38]
	if ix.b[38] != compNone {
		t.Errorf("index compression %d", ix.b[38])
	}
	if got, want := builtinChecksum(ChecksumXXH3, ix.b[:39]), binary.LittleEndian.Uint32(ix.b[39:]); got != want || want != 0x10f55850 {
		t.Errorf("index checksum %#x, stored %#x", got, want)
	}
	hs, err := decodeIndex(blk, true, false, nil)
	if err != nil || len(hs) != 1 || hs[0] != (blockHandle{0, 1031}) {
		t.Errorf("index handles %v, %v", hs, err)
	}
}

// TestChecksumVectors pins the checksum functions to known values.
func TestChecksumVectors(t *testing.T) {
	for _, c := range []struct {
		typ  ChecksumType
		in   string
		want uint32
	}{
		{ChecksumXXHash, "", 0x02cc5d05},  // XXH32 reference value
		{ChecksumXXHash, "a", 0x550d7456}, // XXH32 reference value
		{ChecksumXXHash64, "", 0x51d8e999},
		{ChecksumCRC32c, "", maskCRC(0)},
		{ChecksumXXH3, "", 0},
	} {
		if got := builtinChecksum(c.typ, []byte(c.in)); got != c.want {
			t.Errorf("%s(%q) = %#x, want %#x", c.typ, c.in, got, c.want)
		}
	}
}
