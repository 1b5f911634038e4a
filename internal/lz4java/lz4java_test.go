package lz4java

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// The fixture was framed independently (Python lz4.block + xxhash) the way
// lz4-java frames it.
func TestReadPythonFramed(t *testing.T) {
	enc, err := os.ReadFile("testdata/python-lz4block.bin")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile("testdata/python-lz4block.raw")
	got, err := io.ReadAll(NewReader(bytes.NewReader(enc)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("decoded %d bytes, want %d", len(got), len(want))
	}
	// Our writer frames the same blocks: same headers, same lengths.
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	w.Write(want)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(buf.Bytes(), []byte(Magic)); n != bytes.Count(enc, []byte(Magic)) {
		t.Fatalf("%d blocks, Python framed %d", n, bytes.Count(enc, []byte(Magic)))
	}
	if !bytes.Equal(enc[len(enc)-HeaderLen:], buf.Bytes()[buf.Len()-HeaderLen:]) {
		t.Fatalf("end block %x, want %x", buf.Bytes()[buf.Len()-HeaderLen:], enc[len(enc)-HeaderLen:])
	}
	if buf.Bytes()[8] != 0x25 {
		t.Fatalf("token %#x, want 0x25 (LZ4, level 5 for 32 KiB)", buf.Bytes()[8])
	}
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 100, DefaultBlockSize - 1, DefaultBlockSize, DefaultBlockSize + 1, 5*DefaultBlockSize + 17} {
		for _, random := range []bool{false, true} {
			in := make([]byte, size)
			for i := range in {
				if random {
					in[i] = byte(r.Uint32())
				} else {
					in[i] = byte(i % 7)
				}
			}
			var buf bytes.Buffer
			w := NewWriter(&buf, 0)
			// Uneven writes.
			for p := in; len(p) > 0; {
				k := min(len(p), 1+r.IntN(40000))
				if _, err := w.Write(p[:k]); err != nil {
					t.Fatal(err)
				}
				p = p[k:]
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if w.Written() != int64(buf.Len()) {
				t.Fatalf("Written %d, buffer %d", w.Written(), buf.Len())
			}
			zr := NewReader(&buf)
			out, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("size %d: %v", size, err)
			}
			if !bytes.Equal(in, out) {
				t.Fatalf("size %d random %v: round trip differs", size, random)
			}
			if wantBlocks := (size + DefaultBlockSize - 1) / DefaultBlockSize; zr.Blocks() != wantBlocks {
				t.Fatalf("size %d: %d blocks, want %d", size, zr.Blocks(), wantBlocks)
			}
		}
	}
}

func TestConcatenatedStreams(t *testing.T) {
	var buf bytes.Buffer
	for _, s := range []string{"first ", "", "second"} {
		w := NewWriter(&buf, 0)
		w.Write([]byte(s))
		w.Close()
	}
	out, err := io.ReadAll(NewReader(&buf))
	if err != nil || string(out) != "first second" {
		t.Fatalf("got %q, %v", out, err)
	}
}

func TestDamage(t *testing.T) {
	var good bytes.Buffer
	w := NewWriter(&good, 0)
	w.Write(bytes.Repeat([]byte("spark state "), 5000))
	w.Close()
	g := good.Bytes()
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(g)) }
	cases := map[string][]byte{
		"empty":            nil,
		"bad magic":        mut(func(b []byte) []byte { b[0] = 'X'; return b }),
		"bad method":       mut(func(b []byte) []byte { b[8] = 0x35; return b }),
		"raw too long":     mut(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[13:], 1<<20); return b }),
		"negative len":     mut(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[9:], 0xFFFFFFF0); return b }),
		"checksum":         mut(func(b []byte) []byte { b[17] ^= 1; return b }),
		"payload flipped":  mut(func(b []byte) []byte { b[HeaderLen+30] ^= 0x55; return b }),
		"truncated header": g[:10],
		"truncated block":  g[:HeaderLen+5],
		"no end block":     g[:len(g)-HeaderLen],
		"half end block":   g[:len(g)-3],
		"end with check":   mut(func(b []byte) []byte { b[len(b)-1] = 1; return b }),
		"trailing garbage": append(bytes.Clone(g), 1, 2, 3),
	}
	for name, in := range cases {
		_, err := io.ReadAll(NewReader(bytes.NewReader(in)))
		if !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
	}
}

func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	w.Write(bytes.Repeat([]byte("abcdefgh"), 100))
	w.Close()
	f.Add(buf.Bytes())
	enc, _ := os.ReadFile("testdata/python-lz4block.bin")
	f.Add(enc[:200])
	f.Add([]byte(Magic + "\x15\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := io.ReadAll(NewReader(bytes.NewReader(in)))
		if err != nil {
			if !errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// Whatever decodes re-encodes and decodes the same.
		var b bytes.Buffer
		zw := NewWriter(&b, 0)
		zw.Write(out)
		zw.Close()
		again, err := io.ReadAll(NewReader(&b))
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("re-encode: %v", err)
		}
	})
}

// Reads of every size, smaller and larger than a block, mixed (so blocks
// are decoded both straight into the caller's buffer and into the
// reader's own), return the stream's bytes in order.
func TestReadSizes(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	in := make([]byte, 7*DefaultBlockSize+123)
	for i := range in {
		in[i] = byte(i % 13)
		if i%3 == 0 {
			in[i] = byte(r.Uint32())
		}
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	w.Write(in)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, sizes := range [][]int{{1}, {100}, {DefaultBlockSize - 1}, {DefaultBlockSize}, {64 << 10}, {5, DefaultBlockSize, 1, 40000, 0}} {
		zr := NewReader(bytes.NewReader(buf.Bytes()))
		var out []byte
		for i := 0; ; i++ {
			p := make([]byte, sizes[i%len(sizes)])
			n, err := zr.Read(p)
			out = append(out, p[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("read sizes %v: bytes differ", sizes)
		}
	}
}
