// Package rocksdbsst reads RocksDB block-based tables (SST files), read-only:
// the footer of format versions 2..7, metaindex, table properties, index
// (binary search, hash, with first key, partitioned) and data blocks,
// uncompressed or compressed with Snappy, LZ4, Zstd, Zlib or BZip2, checked
// with any built-in block checksum (CRC32c, xxHash, xxHash64, XXH3). Live
// applies RocksDB's precedence over the tables of one database version.
// FORMAT.md describes the subset read.
package rocksdbsst

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// BytewiseComparator is the only comparator name this package accepts.
const BytewiseComparator = "leveldb.BytewiseComparator"

// Index types (BlockBasedTableOptions::IndexType), property
// rocksdb.block.based.table.index.type.
const (
	IndexBinarySearch         = 0
	IndexHashSearch           = 1
	IndexTwoLevel             = 2 // partitioned index
	IndexBinarySearchFirstKey = 3
)

// Names of meta blocks and properties this package reads.
const (
	indexTypeProperty          = "rocksdb.block.based.table.index.type"
	propertiesBlockName        = "rocksdb.properties"
	rangeDelBlockName          = "rocksdb.range_del"
	indexBlockName             = "rocksdb.index"
	compressionDictBlockName   = "rocksdb.compression_dict"
	globalSeqnoProperty        = "rocksdb.external_sst_file.global_seqno"
	separateKeyValueProperty   = "rocksdb.separate.key.value.in.data.block"
	indexKeyIsUserKeyProperty  = "rocksdb.index.key.is.user.key"
	indexValueIsDeltaEncodedPr = "rocksdb.index.value.is.delta.encoded"
)

// Properties are the table properties of rocksdb.properties plus the footer.
type Properties struct {
	FormatVersion int          // from the footer
	ChecksumType  ChecksumType // from the footer

	Comparator       string
	MergeOperator    string
	Compression      string // the table's configured compression name
	FilterPolicy     string
	ColumnFamilyID   uint64
	ColumnFamilyName string

	NumEntries        uint64 // point entries incl. deletions and merges
	NumDeletions      uint64
	NumMergeOperands  uint64
	NumRangeDeletions uint64
	NumDataBlocks     uint64
	DataSize          uint64
	IndexSize         uint64
	FilterSize        uint64
	RawKeySize        uint64
	RawValueSize      uint64

	IndexType                int // IndexBinarySearch, ...
	IndexKeyIsUserKey        bool
	IndexValueIsDeltaEncoded bool
	IndexPartitions          uint64

	// All holds every property as stored (numbers varint-encoded).
	All map[string][]byte
}

// Table is an open table. Its methods may be called concurrently; each Iter
// is for one goroutine.
type Table struct {
	r      io.ReaderAt
	size   int64
	footer footer
	props  Properties
	meta   map[string]blockHandle
	// dataBlocks are the handles of the data blocks in key order.
	dataBlocks []blockHandle
	noVerify   bool
}

// Open reads the footer, metaindex, properties and index of the table of the
// given size in r, checking their checksums. Data blocks are read by NewIter.
func Open(r io.ReaderAt, size int64) (*Table, error) {
	return open(r, size, true)
}

// open is Open; verify false skips block checksums, so the fuzz test reaches
// the decoders behind them.
func open(r io.ReaderAt, size int64, verify bool) (*Table, error) {
	if size < footerLen {
		return nil, corruptf("file of %d bytes is too short to be a RocksDB table (at least %d)", size, footerLen)
	}
	var fb [footerLen]byte
	if _, err := r.ReadAt(fb[:], size-footerLen); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, corruptf("footer: file shorter than %d bytes", size)
		}
		return nil, fmt.Errorf("rocksdbsst: read footer: %w", err)
	}
	f, err := decodeFooter(fb[:], size)
	if err != nil {
		return nil, err
	}
	t := &Table{r: r, size: size, footer: f, meta: map[string]blockHandle{}, noVerify: !verify}
	mb, err := t.readBlock(f.metaindex, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("metaindex block: %w", err)
	}
	err = forEachEntry(mb, func(k, v []byte) error {
		h, _, err := decodeHandle(v)
		if err != nil {
			return fmt.Errorf("metaindex entry %q: %w", k, err)
		}
		t.meta[string(k)] = h
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metaindex block: %w", err)
	}
	if err := t.readProperties(); err != nil {
		return nil, err
	}
	if _, ok := t.meta[compressionDictBlockName]; ok {
		return nil, unsupportedf("compression dictionary (meta block %s)", compressionDictBlockName)
	}
	index := f.index
	if f.formatVersion >= 6 {
		h, ok := t.meta[indexBlockName]
		if !ok {
			return nil, corruptf("format_version %d table without %s in its metaindex", f.formatVersion, indexBlockName)
		}
		index = h
	}
	if err := t.readIndex(index); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Table) readProperties() error {
	h, ok := t.meta[propertiesBlockName]
	if !ok {
		return corruptf("no %s block in the metaindex", propertiesBlockName)
	}
	b, err := t.readBlock(h, nil, nil)
	if err != nil {
		return fmt.Errorf("properties block: %w", err)
	}
	p := &t.props
	p.FormatVersion = t.footer.formatVersion
	p.ChecksumType = t.footer.checksum
	p.All = map[string][]byte{}
	err = forEachEntry(b, func(k, v []byte) error {
		p.All[string(k)] = slices.Clone(v)
		return nil
	})
	if err != nil {
		return fmt.Errorf("properties block: %w", err)
	}
	str := func(name string) string { return string(p.All[name]) }
	var numErr error
	num := func(name string) uint64 {
		v, ok := p.All[name]
		if !ok {
			return 0
		}
		u, n := uvarint(v)
		if n != len(v) && numErr == nil {
			numErr = corruptf("property %s is not a varint", name)
		}
		return u
	}
	p.Comparator = str("rocksdb.comparator")
	p.MergeOperator = str("rocksdb.merge.operator")
	p.Compression = str("rocksdb.compression")
	p.FilterPolicy = str("rocksdb.filter.policy")
	p.ColumnFamilyName = str("rocksdb.column.family.name")
	p.ColumnFamilyID = num("rocksdb.column.family.id")
	p.NumEntries = num("rocksdb.num.entries")
	p.NumDeletions = num("rocksdb.deleted.keys")
	p.NumMergeOperands = num("rocksdb.merge.operands")
	p.NumRangeDeletions = num("rocksdb.num.range-deletions")
	p.NumDataBlocks = num("rocksdb.num.data.blocks")
	p.DataSize = num("rocksdb.data.size")
	p.IndexSize = num("rocksdb.index.size")
	p.FilterSize = num("rocksdb.filter.size")
	p.RawKeySize = num("rocksdb.raw.key.size")
	p.RawValueSize = num("rocksdb.raw.value.size")
	p.IndexPartitions = num("rocksdb.index.partitions")
	p.IndexKeyIsUserKey = num(indexKeyIsUserKeyProperty) != 0
	p.IndexValueIsDeltaEncoded = num(indexValueIsDeltaEncodedPr) != 0
	if numErr != nil {
		return fmt.Errorf("properties block: %w", numErr)
	}
	if v, ok := p.All[indexTypeProperty]; ok {
		if len(v) != 4 {
			return corruptf("property %s has %d bytes, want 4", indexTypeProperty, len(v))
		}
		p.IndexType = int(binary.LittleEndian.Uint32(v))
	}
	if p.Comparator != BytewiseComparator {
		return unsupportedf("comparator %q (only %s)", p.Comparator, BytewiseComparator)
	}
	if num(separateKeyValueProperty) != 0 {
		return unsupportedf("data blocks with separated keys and values")
	}
	if v, ok := p.All[globalSeqnoProperty]; ok && len(v) == 8 && binary.LittleEndian.Uint64(v) != 0 {
		return unsupportedf("ingested file with a global sequence number")
	}
	return nil
}

func (t *Table) readIndex(h blockHandle) error {
	p := &t.props
	b, err := t.readBlock(h, nil, nil)
	if err != nil {
		return fmt.Errorf("index block: %w", err)
	}
	firstKey := p.IndexType == IndexBinarySearchFirstKey
	switch p.IndexType {
	case IndexBinarySearch, IndexHashSearch, IndexBinarySearchFirstKey:
		t.dataBlocks, err = decodeIndex(b, p.IndexValueIsDeltaEncoded, firstKey, nil)
		if err != nil {
			return fmt.Errorf("index block: %w", err)
		}
	case IndexTwoLevel:
		// The top level lists index partitions, each an index block of
		// the same encoding.
		parts, err := decodeIndex(b, p.IndexValueIsDeltaEncoded, false, nil)
		if err != nil {
			return fmt.Errorf("top-level index block: %w", err)
		}
		var buf []byte
		for i, ph := range parts {
			pb, err := t.readBlock(ph, &buf, nil)
			if err != nil {
				return fmt.Errorf("index partition %d: %w", i, err)
			}
			t.dataBlocks, err = decodeIndex(pb, p.IndexValueIsDeltaEncoded, false, t.dataBlocks)
			if err != nil {
				return fmt.Errorf("index partition %d: %w", i, err)
			}
		}
	default:
		return unsupportedf("index type %d", p.IndexType)
	}
	for i, d := range t.dataBlocks {
		if err := t.checkHandle(d); err != nil {
			return fmt.Errorf("index entry %d: %w", i, err)
		}
	}
	return nil
}

// checkHandle refuses a handle outside the blocks region (before the footer).
func (t *Table) checkHandle(h blockHandle) error {
	end := h.offset + h.size + trailerLen
	if h.size > t.footer.offset || h.offset > t.footer.offset || end > t.footer.offset || end < h.offset {
		return corruptf("block handle (offset %d, size %d) outside the %d-byte file", h.offset, h.size, t.size)
	}
	return nil
}

// readBlock reads the block at h with its trailer, checks its checksum and
// returns its uncompressed contents. raw and out are reusable buffers (nil
// allocates); the result aliases one of them.
func (t *Table) readBlock(h blockHandle, raw, out *[]byte) ([]byte, error) {
	b, _, err := t.readBlockType(h, raw, out)
	return b, err
}

// readBlockType is readBlock that also returns the block's compression type.
func (t *Table) readBlockType(h blockHandle, raw, out *[]byte) ([]byte, byte, error) {
	if err := t.checkHandle(h); err != nil {
		return nil, 0, err
	}
	var rb []byte
	if raw == nil {
		raw = &rb
	}
	n := int(h.size) + trailerLen
	*raw = grow(*raw, n)
	buf := *raw
	if _, err := t.r.ReadAt(buf, int64(h.offset)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, 0, corruptf("block at offset %d: %v", h.offset, err)
		}
		return nil, 0, fmt.Errorf("rocksdbsst: read block at offset %d: %w", h.offset, err)
	}
	if ct := t.footer.checksum; ct != ChecksumNone && !t.noVerify {
		stored := binary.LittleEndian.Uint32(buf[h.size+1:])
		got := builtinChecksum(ct, buf[:h.size+1]) + contextModifier(t.footer.baseContext, h.offset)
		if got != stored {
			return nil, 0, corruptf("block at offset %d (size %d): %s checksum mismatch (stored %#08x, computed %#08x)", h.offset, h.size, ct, stored, got)
		}
	}
	comp := buf[h.size]
	if comp == compNone {
		return buf[:h.size], comp, nil
	}
	var ob []byte
	if out == nil {
		out = &ob
	}
	d, err := decompress(comp, buf[:h.size], *out)
	if err != nil {
		return nil, 0, fmt.Errorf("block at offset %d: %w", h.offset, err)
	}
	*out = d
	return d, comp, nil
}

// Properties returns the table's properties.
func (t *Table) Properties() Properties { return t.props }

// NumDataBlocks is the number of data blocks the index lists.
func (t *Table) NumDataBlocks() int { return len(t.dataBlocks) }

// RangeTombstone deletes user keys in [Start, End) with a sequence number
// below Seq.
type RangeTombstone struct {
	Start, End []byte
	Seq        uint64
}

// RangeDeletions returns the range tombstones of the table (the
// rocksdb.range_del block), in table order; none when it has no such block.
func (t *Table) RangeDeletions() ([]RangeTombstone, error) {
	h, ok := t.meta[rangeDelBlockName]
	if !ok {
		return nil, nil
	}
	b, err := t.readBlock(h, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("range deletion block: %w", err)
	}
	var out []RangeTombstone
	err = forEachEntry(b, func(k, v []byte) error {
		ik, err := parseInternalKey(k)
		if err != nil {
			return err
		}
		if ik.Kind != KindRangeDelete {
			return corruptf("range deletion block holds a %s entry", ik.Kind)
		}
		out = append(out, RangeTombstone{Start: slices.Clone(ik.UserKey), End: slices.Clone(v), Seq: ik.Seq})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("range deletion block: %w", err)
	}
	return out, nil
}

// Kind is the value type in an internal key's trailer (db/dbformat.h).
type Kind uint8

// Kinds that occur in table files.
const (
	KindDelete              Kind = 0x0
	KindValue               Kind = 0x1
	KindMerge               Kind = 0x2
	KindSingleDelete        Kind = 0x7
	KindRangeDelete         Kind = 0xF
	KindBlobIndex           Kind = 0x11
	KindDeleteWithTimestamp Kind = 0x14
	KindWideColumnEntity    Kind = 0x16
	KindValuePreferredSeqno Kind = 0x18
)

func (k Kind) String() string {
	switch k {
	case KindDelete:
		return "delete"
	case KindValue:
		return "value"
	case KindMerge:
		return "merge"
	case KindSingleDelete:
		return "single-delete"
	case KindRangeDelete:
		return "range-delete"
	case KindBlobIndex:
		return "blob-index"
	case KindDeleteWithTimestamp:
		return "delete-with-timestamp"
	case KindWideColumnEntity:
		return "wide-column-entity"
	case KindValuePreferredSeqno:
		return "value-preferred-seqno"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// InternalKey is a user key with its 8-byte trailer (seq<<8 | kind).
type InternalKey struct {
	UserKey []byte
	Seq     uint64
	Kind    Kind
}

func parseInternalKey(k []byte) (InternalKey, error) {
	if len(k) < 8 {
		return InternalKey{}, corruptf("internal key of %d bytes (at least 8)", len(k))
	}
	n := len(k) - 8
	tr := binary.LittleEndian.Uint64(k[n:])
	return InternalKey{UserKey: k[:n:n], Seq: tr >> 8, Kind: Kind(tr)}, nil
}

// VerifyMetaBlocks reads every block the metaindex lists (the filter, the
// range deletions, the properties and any other) and checks its checksum.
// NewIter checks the data blocks it reads; Open the metaindex, properties
// and index; so a full iteration plus this checks every block of the table.
func (t *Table) VerifyMetaBlocks() error {
	var raw, out []byte
	for name, h := range t.meta {
		if _, _, err := t.readBlockType(h, &raw, &out); err != nil {
			return fmt.Errorf("meta block %s: %w", name, err)
		}
	}
	return nil
}
