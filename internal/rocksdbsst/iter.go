package rocksdbsst

import "fmt"

// Iter walks the point entries of a table (not its range tombstones) in table
// order: user key ascending, then sequence number descending. It reads one
// data block at a time and checks each block's checksum.
type Iter struct {
	t     *Table
	next  int // index of the next data block
	bi    blockIter
	raw   []byte
	out   []byte
	key   InternalKey
	err   error
	inBlk bool
	// compSeen has bit t set once a data block of compression type t was
	// read (tests check that a compression was really exercised).
	compSeen uint64
}

// NewIter returns an iterator positioned before the first entry.
func (t *Table) NewIter() *Iter { return &Iter{t: t} }

// Next advances to the next entry and reports whether there is one; on false
// check Err.
func (it *Iter) Next() bool {
	if it.err != nil {
		return false
	}
	for {
		if it.inBlk {
			ok, err := it.bi.next(false)
			if err != nil {
				it.err = fmt.Errorf("data block %d: %w", it.next-1, err)
				return false
			}
			if ok {
				k, err := parseInternalKey(it.bi.key)
				if err != nil {
					it.err = fmt.Errorf("data block %d: %w", it.next-1, err)
					return false
				}
				if k.Kind == KindRangeDelete {
					it.err = corruptf("data block %d holds a range deletion entry", it.next-1)
					return false
				}
				it.key = k
				return true
			}
			it.inBlk = false
		}
		if it.next >= len(it.t.dataBlocks) {
			return false
		}
		h := it.t.dataBlocks[it.next]
		it.next++
		b, comp, err := it.t.readBlockType(h, &it.raw, &it.out)
		if err == nil && comp < 64 {
			it.compSeen |= 1 << comp
		}
		if err != nil {
			it.err = fmt.Errorf("data block %d: %w", it.next-1, err)
			return false
		}
		blk, err := parseBlock(b)
		if err != nil {
			it.err = fmt.Errorf("data block %d: %w", it.next-1, err)
			return false
		}
		it.bi.reset(blk.entries)
		it.inBlk = true
	}
}

// Key is the current entry's key; its UserKey is valid until the next call
// to Next.
func (it *Iter) Key() InternalKey { return it.key }

// Value is the current entry's value, valid until the next call to Next.
func (it *Iter) Value() []byte { return it.bi.value }

// Err is the error that stopped the iteration, if any.
func (it *Iter) Err() error { return it.err }
