// Package lz4java reads and writes the block streams of lz4-java's
// LZ4BlockInputStream / LZ4BlockOutputStream, the framing Spark's "lz4"
// compression codec (and so the HDFS-backed state store's .delta and
// .snapshot files) uses.
//
// A stream is a sequence of blocks, each a 21-byte header then its payload:
//
//	"LZ4Block" | token | compressedLen int32 LE | rawLen int32 LE | checksum int32 LE
//
// token = method | level: method 0x10 raw or 0x20 LZ4 block, level =
// log2(blockSize)-10. checksum = xxhash32(raw, seed 0x9747b28c) & 0x0FFFFFFF
// (lz4-java's Checksum adapter keeps 28 bits). A block with both lengths 0
// (and checksum 0) ends a stream; further streams may follow (Spark reads
// concatenated streams), and the end of input after an end block is the end.
package lz4java

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/pierrec/lz4/v4"

	"github.com/rebucket/rebucket/internal/xxh32"
	"github.com/rebucket/rebucket/snapshotfmt"
)

const (
	// Magic starts every block.
	Magic = "LZ4Block"
	// HeaderLen is the size of a block header.
	HeaderLen = 21
	// Seed is lz4-java's DEFAULT_SEED for the block checksum.
	Seed = 0x9747b28c
	// DefaultBlockSize is Spark's spark.io.compression.lz4.blockSize (32 KiB).
	DefaultBlockSize = 32 << 10

	methodRaw = 0x10
	methodLZ4 = 0x20
	levelBase = 10
)

// Checksum is the checksum lz4-java stores for a block's raw bytes.
func Checksum(raw []byte) uint32 { return xxh32.Checksum(raw, Seed) & 0x0FFFFFFF }

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: lz4-java block stream: %s", snapshotfmt.ErrCorrupt, fmt.Sprintf(format, a...))
}

// Reader decodes a block stream.
type Reader struct {
	r      io.Reader
	hdr    [HeaderLen]byte
	comp   []byte
	raw    []byte
	pos    int   // read position in raw
	off    int64 // byte offset of the next header in the input
	ended  bool  // an end block was read
	err    error
	blocks int
}

// NewReader reads the block stream r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Blocks is the number of data blocks read so far.
func (z *Reader) Blocks() int { return z.blocks }

// Read implements io.Reader. Damage (bad magic, token, lengths, checksum,
// LZ4 data, truncation, a missing end block) is an error wrapping
// snapshotfmt.ErrCorrupt.
func (z *Reader) Read(p []byte) (int, error) {
	for z.pos >= len(z.raw) {
		if z.err != nil {
			return 0, z.err
		}
		// A block that fits p is decoded straight into it (a bufio.Reader
		// above asks for its free space), saving a copy of every byte.
		var n int
		n, z.err = z.next(p)
		if n > 0 {
			return n, nil
		}
	}
	n := copy(p, z.raw[z.pos:])
	z.pos += n
	return n, nil
}

// next reads the next data block into dst when it fits (returning its
// length), else into z.raw (returning 0), or returns io.EOF.
func (z *Reader) next(dst []byte) (int, error) {
	for {
		at := z.off
		n, err := io.ReadFull(z.r, z.hdr[:])
		if err == io.EOF && z.ended {
			return 0, io.EOF
		}
		if err == io.EOF {
			return 0, corrupt("no end block at byte %d (truncated?)", at)
		}
		if err == io.ErrUnexpectedEOF {
			return 0, corrupt("truncated block header at byte %d (%d of %d bytes)", at, n, HeaderLen)
		}
		if err != nil {
			return 0, err
		}
		z.off += HeaderLen
		if string(z.hdr[:8]) != Magic {
			return 0, corrupt("bad block magic %q at byte %d", z.hdr[:8], at)
		}
		token := z.hdr[8]
		method := token & 0xF0
		level := levelBase + int(token&0x0F)
		clen := int32(binary.LittleEndian.Uint32(z.hdr[9:]))
		rlen := int32(binary.LittleEndian.Uint32(z.hdr[13:]))
		check := binary.LittleEndian.Uint32(z.hdr[17:])
		if method != methodRaw && method != methodLZ4 {
			return 0, corrupt("unknown compression method 0x%02x at byte %d", token, at)
		}
		if rlen > 1<<level || rlen < 0 || clen < 0 || (rlen == 0) != (clen == 0) ||
			(method == methodRaw && rlen != clen) ||
			// An LZ4 block is never longer than its bound; checked before
			// allocating so a damaged length cannot ask for gigabytes.
			(method == methodLZ4 && int(clen) > lz4.CompressBlockBound(int(rlen))) {
			return 0, corrupt("bad block lengths (compressed %d, raw %d, token 0x%02x) at byte %d", clen, rlen, token, at)
		}
		if rlen == 0 {
			if check != 0 {
				return 0, corrupt("end block with checksum 0x%08x at byte %d", check, at)
			}
			z.ended = true
			continue
		}
		z.ended = false
		if cap(z.comp) < int(clen) {
			z.comp = make([]byte, clen)
		}
		z.comp = z.comp[:clen]
		if n, err := io.ReadFull(z.r, z.comp); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return 0, corrupt("truncated block at byte %d (%d of %d bytes)", at, n, clen)
			}
			return 0, err
		}
		z.off += int64(clen)
		direct := len(dst) >= int(rlen)
		out := dst
		if !direct {
			if cap(z.raw) < int(rlen) {
				z.raw = make([]byte, rlen)
			}
			out = z.raw
		}
		out = out[:rlen]
		z.raw, z.pos = z.raw[:0], 0
		if method == methodRaw {
			copy(out, z.comp)
		} else {
			n, err := lz4.UncompressBlock(z.comp, out)
			if err != nil || n != int(rlen) {
				return 0, corrupt("block at byte %d does not decompress to %d bytes: %v", at, rlen, err)
			}
		}
		if got := Checksum(out); got != check {
			return 0, corrupt("block at byte %d: checksum 0x%07x, header says 0x%07x", at, got, check)
		}
		z.blocks++
		if direct {
			return int(rlen), nil
		}
		z.raw = out
		return 0, nil
	}
}

// Writer encodes a block stream as lz4-java's LZ4BlockOutputStream with
// its fast compressor does: blocks of blockSize raw bytes, an LZ4 block
// unless that is not smaller (then raw), and an end block at Close.
// The compressed bytes may differ from Java's; any lz4-java reader reads them.
type Writer struct {
	w     io.Writer
	level int
	buf   []byte
	out   []byte
	c     lz4.Compressor
	err   error
	n     int64
}

// NewWriter writes a block stream of blockSize-byte blocks (a power of two
// is what Java writes; 0 means DefaultBlockSize) to w.
func NewWriter(w io.Writer, blockSize int) *Writer {
	if blockSize <= 0 {
		blockSize = DefaultBlockSize
	}
	if blockSize < 64 || blockSize > 1<<25 {
		panic(fmt.Sprintf("lz4java: block size %d out of range", blockSize))
	}
	// lz4-java: compressionLevel = max(0, 32 - nlz(blockSize-1) - 10).
	level := max(0, 32-bits.LeadingZeros32(uint32(blockSize-1))-levelBase)
	return &Writer{
		w:     w,
		level: level,
		buf:   make([]byte, 0, blockSize),
		out:   make([]byte, HeaderLen+lz4.CompressBlockBound(blockSize)),
	}
}

// Write implements io.Writer.
func (z *Writer) Write(p []byte) (int, error) {
	if z.err != nil {
		return 0, z.err
	}
	n := len(p)
	for len(p) > 0 {
		k := copy(z.buf[len(z.buf):cap(z.buf)], p)
		z.buf = z.buf[:len(z.buf)+k]
		p = p[k:]
		if len(z.buf) == cap(z.buf) {
			if err := z.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// Written is the number of compressed bytes written so far.
func (z *Writer) Written() int64 { return z.n }

func (z *Writer) flush() error {
	if len(z.buf) == 0 {
		return nil
	}
	raw := z.buf
	clen, err := z.c.CompressBlock(raw, z.out[HeaderLen:])
	method := byte(methodLZ4)
	if err != nil || clen == 0 || clen >= len(raw) {
		method = methodRaw
		clen = copy(z.out[HeaderLen:], raw)
	}
	z.header(method, clen, len(raw), Checksum(raw))
	z.buf = z.buf[:0]
	return z.emit(z.out[:HeaderLen+clen])
}

func (z *Writer) header(method byte, clen, rlen int, check uint32) {
	copy(z.out, Magic)
	z.out[8] = method | byte(z.level)
	binary.LittleEndian.PutUint32(z.out[9:], uint32(clen))
	binary.LittleEndian.PutUint32(z.out[13:], uint32(rlen))
	binary.LittleEndian.PutUint32(z.out[17:], check)
}

func (z *Writer) emit(b []byte) error {
	n, err := z.w.Write(b)
	z.n += int64(n)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	z.err = err
	return err
}

// Close flushes the last block and writes the end block. It does not
// close the underlying writer.
func (z *Writer) Close() error {
	if z.err != nil {
		if errors.Is(z.err, errClosed) {
			return nil
		}
		return z.err
	}
	if err := z.flush(); err != nil {
		return err
	}
	z.header(methodRaw, 0, 0, 0)
	if err := z.emit(z.out[:HeaderLen]); err != nil {
		return err
	}
	z.err = errClosed
	return nil
}

var errClosed = errors.New("lz4java: writer closed")
