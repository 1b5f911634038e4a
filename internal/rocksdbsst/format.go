package rocksdbsst

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"

	"github.com/rebucket/rebucket/internal/xxh32"
)

// Magic numbers at the very end of a table file (table/format.cc and the
// table builders of RocksDB).
const (
	magicBlockBased       = 0x88e241b785f4cff7
	magicLegacyBlockBased = 0xdb4775248b80fb57 // format_version 0/1, LevelDB style
	magicPlain            = 0x8242229663bf9564
	magicLegacyPlain      = 0x4f3418eb7a8f13b8
	magicCuckoo           = 0x926789d0c5f17873
)

const (
	// footerLen is the footer size of every block-based format_version >= 1:
	// checksum type (1) + part 2 (40) + format_version (4) + magic (8).
	footerLen = 1 + 40 + 4 + 8
	// trailerLen follows every block: compression type (1) + checksum (4).
	trailerLen = 5
	// minFormatVersion and maxFormatVersion bound what this reader decodes.
	// Version 7 differs from 6 only in custom compression (refused by type).
	minFormatVersion = 2
	maxFormatVersion = 7
)

var extendedMagic = [4]byte{0x3e, 0x00, 0x7a, 0x00}

// ChecksumType is the block checksum of a table, as in the footer.
type ChecksumType uint8

// The checksum types RocksDB defines (include/rocksdb/table.h).
const (
	ChecksumNone     ChecksumType = 0
	ChecksumCRC32c   ChecksumType = 1
	ChecksumXXHash   ChecksumType = 2
	ChecksumXXHash64 ChecksumType = 3
	ChecksumXXH3     ChecksumType = 4
)

func (c ChecksumType) String() string {
	switch c {
	case ChecksumNone:
		return "none"
	case ChecksumCRC32c:
		return "crc32c"
	case ChecksumXXHash:
		return "xxhash"
	case ChecksumXXHash64:
		return "xxhash64"
	case ChecksumXXH3:
		return "xxh3"
	}
	return fmt.Sprintf("checksum(%d)", uint8(c))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskCRC is RocksDB's crc32c::Mask: a stored CRC of data that itself holds
// CRCs must not look like a CRC of that data.
func maskCRC(c uint32) uint32 {
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// builtinChecksum is RocksDB's ComputeBuiltinChecksum over data; for a block
// data is the block contents followed by its compression type byte.
func builtinChecksum(t ChecksumType, data []byte) uint32 {
	switch t {
	case ChecksumCRC32c:
		return maskCRC(crc32.Checksum(data, castagnoli))
	case ChecksumXXHash:
		return xxh32.Checksum(data, 0)
	case ChecksumXXHash64:
		return uint32(xxhash.Sum64(data))
	case ChecksumXXH3:
		if len(data) == 0 {
			return 0
		}
		// XXH3 of all but the last byte, then the last byte mixed in by xor
		// (ModifyChecksumForLastByte), so the block and its type need no
		// streaming state.
		v := uint32(xxh3.Hash(data[:len(data)-1]))
		return v ^ uint32(data[len(data)-1])*0x6b9083d9
	}
	return 0
}

// contextModifier is ChecksumModifierForContext (format_version >= 6): the
// stored checksum of a block includes its file offset, so a block copied to
// the wrong place fails. Zero when the base is zero (older versions).
func contextModifier(base uint32, offset uint64) uint32 {
	if base == 0 {
		return 0
	}
	return base ^ (uint32(offset) + uint32(offset>>32))
}

// blockHandle locates a block (without its 5-byte trailer) in the file.
type blockHandle struct {
	offset, size uint64
}

// uvarint decodes a varint of at most 64 bits; n <= 0 when malformed.
func uvarint(b []byte) (uint64, int) {
	return binary.Uvarint(b)
}

// uvarint32 decodes a varint32 as RocksDB's GetVarint32Ptr (at most 5 bytes,
// value < 2^32).
func uvarint32(b []byte) (uint32, int) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n > 5 || v > 0xffffffff {
		return 0, -1
	}
	return uint32(v), n
}

func decodeHandle(b []byte) (blockHandle, int, error) {
	off, n1 := uvarint(b)
	if n1 <= 0 {
		return blockHandle{}, 0, corruptf("bad block handle offset")
	}
	size, n2 := uvarint(b[n1:])
	if n2 <= 0 {
		return blockHandle{}, 0, corruptf("bad block handle size")
	}
	return blockHandle{off, size}, n1 + n2, nil
}

// footer is the decoded end of a block-based table.
type footer struct {
	checksum      ChecksumType
	formatVersion int
	metaindex     blockHandle
	index         blockHandle // zero for format_version >= 6: in the metaindex
	baseContext   uint32      // format_version >= 6
	offset        uint64      // where the footer starts
}

// decodeFooter decodes the last footerLen bytes b of a file of the given size.
func decodeFooter(b []byte, size int64) (footer, error) {
	var f footer
	if len(b) < 8 {
		return f, corruptf("file of %d bytes is too short to be a RocksDB table", size)
	}
	magic := binary.LittleEndian.Uint64(b[len(b)-8:])
	switch magic {
	case magicBlockBased:
	case magicLegacyBlockBased:
		return f, unsupportedf("legacy block-based table (format_version 0 or 1, LevelDB magic)")
	case magicPlain, magicLegacyPlain:
		return f, unsupportedf("RocksDB plain table (only block-based tables are read)")
	case magicCuckoo:
		return f, unsupportedf("RocksDB cuckoo table (only block-based tables are read)")
	default:
		return f, corruptf("bad magic number %#016x at the end of the file: not a RocksDB block-based table, or truncated", magic)
	}
	if len(b) < footerLen {
		return f, corruptf("file of %d bytes is too short for a table footer", size)
	}
	b = b[len(b)-footerLen:]
	f.offset = uint64(size) - footerLen
	fv := binary.LittleEndian.Uint32(b[footerLen-12:])
	if fv < minFormatVersion || fv > maxFormatVersion {
		if fv < 64 {
			return f, unsupportedf("format_version %d (this reader reads %d..%d)", fv, minFormatVersion, maxFormatVersion)
		}
		return f, corruptf("format_version %d in the footer", fv)
	}
	f.formatVersion = int(fv)
	f.checksum = ChecksumType(b[0])
	if f.checksum > ChecksumXXH3 {
		return f, corruptf("unknown checksum type %d in the footer", b[0])
	}
	if fv < 6 {
		var err error
		var n int
		if f.metaindex, n, err = decodeHandle(b[1:41]); err != nil {
			return f, fmt.Errorf("footer metaindex handle: %w", err)
		}
		if f.index, _, err = decodeHandle(b[1+n : 41]); err != nil {
			return f, fmt.Errorf("footer index handle: %w", err)
		}
		return f, nil
	}
	if [4]byte(b[1:5]) != extendedMagic {
		return f, corruptf("bad extended magic % x in a format_version %d footer", b[1:5], fv)
	}
	stored := binary.LittleEndian.Uint32(b[5:])
	f.baseContext = binary.LittleEndian.Uint32(b[9:])
	if f.baseContext == 0 {
		return f, corruptf("zero base context checksum in a format_version %d footer", fv)
	}
	if f.checksum != ChecksumNone {
		var cp [footerLen]byte
		copy(cp[:], b)
		clear(cp[5:9])
		got := builtinChecksum(f.checksum, cp[:]) + contextModifier(f.baseContext, f.offset)
		if got != stored {
			return f, corruptf("footer checksum mismatch (stored %#08x, computed %#08x)", stored, got)
		}
	}
	msize := uint64(binary.LittleEndian.Uint32(b[13:]))
	if binary.LittleEndian.Uint64(b[33:41]) != 0 {
		return f, unsupportedf("format_version %d footer uses a reserved future feature", fv)
	}
	if msize+trailerLen > f.offset {
		return f, corruptf("metaindex size %d exceeds the file", msize)
	}
	f.metaindex = blockHandle{f.offset - trailerLen - msize, msize}
	return f, nil
}
