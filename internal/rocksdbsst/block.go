package rocksdbsst

import (
	"encoding/binary"
)

// Bits of the last uint32 of a block (table/block_based/data_block_footer.cc);
// the rest is the number of restart points.
const (
	footerHashIndexBit   = 1 << 31
	footerUniformKeysBit = 1 << 29 // a hint only
	footerSeparatedKVBit = 1 << 28
	footerReservedBits   = 1 << 30
)

// block is the decoded layout of one uncompressed block: entries, then
// num_restarts uint32 restart offsets, then (data blocks with a hash index)
// the hash buckets and their uint16 count, then the packed footer uint32.
type block struct {
	entries     []byte // the entry region only
	numRestarts uint32
}

func parseBlock(b []byte) (block, error) {
	if len(b) < 4 {
		return block{}, corruptf("block of %d bytes is too short", len(b))
	}
	end := len(b) - 4
	packed := binary.LittleEndian.Uint32(b[end:])
	if packed&footerSeparatedKVBit != 0 {
		return block{}, unsupportedf("data block with separated keys and values")
	}
	if packed&footerReservedBits != 0 {
		return block{}, corruptf("block footer %#08x sets a reserved bit", packed)
	}
	if packed&footerHashIndexBit != 0 {
		// The data block hash index: num_buckets bytes, then uint16 count.
		if end < 2 {
			return block{}, corruptf("block too short for its hash index")
		}
		nb := int(binary.LittleEndian.Uint16(b[end-2:]))
		end -= 2 + nb
		if end < 0 {
			return block{}, corruptf("hash index of %d buckets exceeds its block", nb)
		}
	}
	n := packed &^ (footerHashIndexBit | footerUniformKeysBit)
	if uint64(n)*4 > uint64(end) {
		return block{}, corruptf("block claims %d restart points in %d bytes", n, end)
	}
	if n == 0 && end > 0 {
		return block{}, corruptf("block with entries but no restart point")
	}
	return block{entries: b[:end-int(n)*4], numRestarts: n}, nil
}

// blockIter walks the entries of a block in order, rebuilding each key from
// the shared prefix of the previous one.
type blockIter struct {
	data  []byte
	pos   int
	key   []byte // owned, rebuilt in place
	value []byte // points into data
	// shared is the shared-prefix length of the current entry; in a
	// delta-encoded index block a zero marks a full block handle.
	shared uint32
}

func (it *blockIter) reset(data []byte) {
	it.data = data
	it.pos = 0
	it.key = it.key[:0]
	it.value = nil
}

// next decodes the entry at pos. With noValueLen (index blocks of
// format_version >= 4) the entry has no value length: value is the rest of
// the block and the caller reports how much it used with advance.
func (it *blockIter) next(noValueLen bool) (bool, error) {
	if it.pos >= len(it.data) {
		return false, nil
	}
	p := it.data[it.pos:]
	shared, n1 := uvarint32(p)
	if n1 <= 0 {
		return false, corruptf("bad shared key length at block offset %d", it.pos)
	}
	nonShared, n2 := uvarint32(p[n1:])
	if n2 <= 0 {
		return false, corruptf("bad key length at block offset %d", it.pos)
	}
	h := n1 + n2
	var valueLen uint32
	if !noValueLen {
		var n3 int
		valueLen, n3 = uvarint32(p[h:])
		if n3 <= 0 {
			return false, corruptf("bad value length at block offset %d", it.pos)
		}
		h += n3
	}
	if int(shared) > len(it.key) {
		return false, corruptf("entry at block offset %d shares %d bytes of a %d-byte key", it.pos, shared, len(it.key))
	}
	rest := uint64(len(p) - h)
	if uint64(nonShared)+uint64(valueLen) > rest {
		return false, corruptf("entry at block offset %d exceeds its block", it.pos)
	}
	it.key = append(it.key[:shared], p[h:h+int(nonShared)]...)
	it.shared = shared
	vs := h + int(nonShared)
	if noValueLen {
		it.value = p[vs:]
		it.pos += vs // advance adds the value length
	} else {
		it.value = p[vs : vs+int(valueLen)]
		it.pos += vs + int(valueLen)
	}
	return true, nil
}

func (it *blockIter) advance(n int) { it.pos += n }

// readBlockEntries returns the key/value pairs of a small block whose keys are
// plain strings (metaindex, properties).
func forEachEntry(b []byte, fn func(key, value []byte) error) error {
	blk, err := parseBlock(b)
	if err != nil {
		return err
	}
	var it blockIter
	it.reset(blk.entries)
	for {
		ok, err := it.next(false)
		if err != nil || !ok {
			return err
		}
		if err := fn(it.key, it.value); err != nil {
			return err
		}
	}
}

// decodeIndex appends the data block handles of an index block. With
// deltaEncoded (index_value_is_delta_encoded, format_version >= 4) an entry
// with a shared key prefix stores only the size change from the previous
// handle, and the block is assumed to follow the previous one directly.
// With firstKey (index type kBinarySearchWithFirstKey) each value also
// carries the length-prefixed first key of its block, skipped here.
func decodeIndex(b []byte, deltaEncoded, firstKey bool, out []blockHandle) ([]blockHandle, error) {
	blk, err := parseBlock(b)
	if err != nil {
		return out, err
	}
	var it blockIter
	it.reset(blk.entries)
	var prev blockHandle
	have := false
	for {
		ok, err := it.next(deltaEncoded)
		if err != nil {
			return out, err
		}
		if !ok {
			return out, nil
		}
		v := it.value
		var h blockHandle
		var n int
		if deltaEncoded && it.shared != 0 {
			if !have {
				return out, corruptf("delta-encoded index entry without a previous handle")
			}
			u, m := uvarint(v)
			if m <= 0 {
				return out, corruptf("bad delta-encoded index value")
			}
			delta := int64(u>>1) ^ -int64(u&1)
			h = blockHandle{prev.offset + prev.size + trailerLen, prev.size + uint64(delta)}
			n = m
		} else {
			h, n, err = decodeHandle(v)
			if err != nil {
				return out, err
			}
		}
		if firstKey {
			l, m := uvarint32(v[n:])
			if m <= 0 || uint64(l) > uint64(len(v)-n-m) {
				return out, corruptf("bad first key in an index entry")
			}
			n += m + int(l)
		}
		if deltaEncoded {
			it.advance(n)
		}
		out = append(out, h)
		prev, have = h, true
	}
}
