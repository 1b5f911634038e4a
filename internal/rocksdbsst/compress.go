package rocksdbsst

import (
	"bytes"
	"compress/bzip2"
	"compress/flate"
	"io"
	"sync"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression types of a block trailer (include/rocksdb/compression_type.h).
const (
	compNone   = 0x0
	compSnappy = 0x1
	compZlib   = 0x2
	compBZip2  = 0x3
	compLZ4    = 0x4
	compLZ4HC  = 0x5
	compXpress = 0x6
	compZSTD   = 0x7
)

// maxBlockSize bounds a decompressed block. RocksDB blocks are < 4 GiB, real
// ones a few KiB to a few MiB; the bound keeps a damaged size prefix from
// allocating gigabytes.
var maxBlockSize uint32 = 1 << 30 // a variable so the fuzz test can lower it

func compressionName(t byte) string {
	switch t {
	case compNone:
		return "none"
	case compSnappy:
		return "snappy"
	case compZlib:
		return "zlib"
	case compBZip2:
		return "bzip2"
	case compLZ4:
		return "lz4"
	case compLZ4HC:
		return "lz4hc"
	case compXpress:
		return "xpress"
	case compZSTD:
		return "zstd"
	}
	return "unknown"
}

var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
})

// decompress returns the contents of a block stored with compression type t.
// Every type but snappy and xpress carries RocksDB's "compression format
// version 2" prefix, the decompressed size as a varint32 (format_version >= 2).
// dst is reused when large enough.
func decompress(t byte, src, dst []byte) ([]byte, error) {
	switch t {
	case compSnappy:
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return nil, corruptf("snappy block: %v", err)
		}
		// Snappy cannot expand more than ~64x (a 3-byte copy of 64 bytes).
		if uint64(n) > uint64(maxBlockSize) || n > 64*len(src)+64 {
			return nil, corruptf("snappy block claims %d bytes from %d", n, len(src))
		}
		out, err := snappy.Decode(grow(dst, n), src)
		if err != nil {
			return nil, corruptf("snappy block: %v", err)
		}
		return out, nil
	case compXpress:
		return nil, unsupportedf("xpress block compression")
	case compZlib, compBZip2, compLZ4, compLZ4HC, compZSTD:
	default:
		return nil, unsupportedf("block compression type %#x (custom or unknown)", t)
	}
	size, n := uvarint32(src)
	if n <= 0 {
		return nil, corruptf("%s block: bad decompressed size prefix", compressionName(t))
	}
	if size > maxBlockSize {
		return nil, corruptf("%s block claims %d decompressed bytes", compressionName(t), size)
	}
	src = src[n:]
	switch t {
	case compLZ4, compLZ4HC:
		// LZ4 expands at most ~255x; check before allocating.
		if uint64(size) > 255*uint64(len(src))+16 {
			return nil, corruptf("lz4 block claims %d bytes from %d", size, len(src))
		}
		out := grow(dst, int(size))
		m, err := lz4.UncompressBlock(src, out)
		if err != nil {
			return nil, corruptf("lz4 block: %v", err)
		}
		if m != int(size) {
			return nil, corruptf("lz4 block decompressed to %d bytes, prefix says %d", m, size)
		}
		return out, nil
	case compZSTD:
		// The frame's own content size, when present, must agree: the
		// decoder allocates by it.
		var zh zstd.Header
		if err := zh.Decode(src); err != nil {
			return nil, corruptf("zstd block header: %v", err)
		}
		if zh.HasFCS && zh.FrameContentSize != uint64(size) {
			return nil, corruptf("zstd frame says %d bytes, prefix says %d", zh.FrameContentSize, size)
		}
		d, err := zstdDecoder()
		if err != nil {
			return nil, err
		}
		// Let the decoder grow the output: a damaged prefix must not
		// allocate, only real output does.
		out, err := d.DecodeAll(src, dst[:0])
		if err != nil {
			return nil, corruptf("zstd block: %v", err)
		}
		if len(out) != int(size) {
			return nil, corruptf("zstd block decompressed to %d bytes, prefix says %d", len(out), size)
		}
		return out, nil
	}
	var r io.Reader
	if t == compZlib {
		// RocksDB's zlib blocks are raw deflate (window bits -14).
		fr := flate.NewReader(bytes.NewReader(src))
		defer fr.Close()
		r = fr
	} else {
		r = bzip2.NewReader(bytes.NewReader(src))
	}
	var buf bytes.Buffer
	buf.Grow(min(int(size), 64*len(src)+64))
	m, err := io.Copy(&buf, io.LimitReader(r, int64(size)+1))
	if err != nil {
		return nil, corruptf("%s block: %v", compressionName(t), err)
	}
	if m != int64(size) {
		return nil, corruptf("%s block decompressed to %d bytes, prefix says %d", compressionName(t), m, size)
	}
	return buf.Bytes(), nil
}

func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]byte, n)
}
