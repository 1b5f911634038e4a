package spark

import (
	"bytes"
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// table holds one store partition's rows while its snapshot and deltas
// are applied: records (key and value) in large arena chunks, indexed by
// the 64-bit hash of the key. It holds no Go pointers per row, so a
// partition of millions of rows costs little to the garbage collector
// (about 16 bytes of index and the record's bytes plus 8 per row).
// Keys whose hash collides with another key's go to a small overflow map.
type table struct {
	chunks [][]byte
	idx    map[uint64]uint64 // hash(key) -> ref
	over   map[string]uint64 // colliding keys -> ref
}

const chunkSize = 4 << 20

func newTable() *table { return &table{idx: map[uint64]uint64{}} }

// tombLen in a record's value length marks a tombstone: the key was
// deleted (an overlay of deltas on a snapshot must remember that).
const tombLen = 0xFFFFFFFF

// add appends a record to the arena and returns its ref (chunk<<32|offset);
// v nil and tomb: a tombstone.
func (t *table) add(k, v []byte, tomb bool) uint64 {
	n := 8 + len(k) + len(v)
	if len(t.chunks) == 0 || cap(t.chunks[len(t.chunks)-1])-len(t.chunks[len(t.chunks)-1]) < n {
		t.chunks = append(t.chunks, make([]byte, 0, max(chunkSize, n)))
	}
	ci := len(t.chunks) - 1
	c := t.chunks[ci]
	off := len(c)
	c = binary.LittleEndian.AppendUint32(c, uint32(len(k)))
	c = append(c, k...)
	if tomb {
		c = binary.LittleEndian.AppendUint32(c, tombLen)
	} else {
		c = binary.LittleEndian.AppendUint32(c, uint32(len(v)))
		c = append(c, v...)
	}
	t.chunks[ci] = c
	return uint64(ci)<<32 | uint64(off)
}

// deadBit marks a superseded or deleted record in its key length.
const deadBit = 1 << 31

// kill marks the record of ref dead, so each skips it.
func (t *table) kill(ref uint64) {
	c := t.chunks[ref>>32][uint32(ref):]
	binary.LittleEndian.PutUint32(c, binary.LittleEndian.Uint32(c)|deadBit)
}

// at returns the record of a ref.
func (t *table) at(ref uint64) (k, v []byte) {
	c := t.chunks[ref>>32][uint32(ref):]
	kl := binary.LittleEndian.Uint32(c) &^ deadBit
	k = c[4 : 4+kl]
	c = c[4+kl:]
	vl := binary.LittleEndian.Uint32(c)
	if vl == tombLen {
		return k, nil
	}
	return k, c[4 : 4+vl]
}

func (t *table) put(k, v []byte) { t.set(k, v, false) }

// tomb records that k is deleted (put undoes it).
func (t *table) tomb(k []byte) { t.set(k, nil, true) }

// has says whether k has a record, live or tombstone.
func (t *table) has(k []byte) bool {
	if ref, ok := t.idx[xxh3.Hash(k)]; ok {
		if ok, _ := t.keyIs(ref, k); ok {
			return true
		}
	}
	_, ok := t.over[string(k)]
	return ok
}

func (t *table) set(k, v []byte, tomb bool) {
	h := xxh3.Hash(k)
	if ref, ok := t.idx[h]; ok {
		if ok, _ := t.keyIs(ref, k); ok {
			t.kill(ref)
			t.idx[h] = t.add(k, v, tomb)
			return
		}
		if t.over == nil {
			t.over = map[string]uint64{}
		}
		if old, ok := t.over[string(k)]; ok {
			t.kill(old)
		}
		t.over[string(k)] = t.add(k, v, tomb)
		return
	}
	if old, ok := t.over[string(k)]; ok {
		t.kill(old)
		t.over[string(k)] = t.add(k, v, tomb)
		return
	}
	t.idx[h] = t.add(k, v, tomb)
}

func (t *table) del(k []byte) {
	h := xxh3.Hash(k)
	if ref, ok := t.idx[h]; ok {
		if ok, _ := t.keyIs(ref, k); ok {
			t.kill(ref)
			delete(t.idx, h)
			return
		}
	}
	if old, ok := t.over[string(k)]; ok {
		t.kill(old)
		delete(t.over, string(k))
	}
}

func (t *table) keyIs(ref uint64, k []byte) (bool, []byte) {
	rk, _ := t.at(ref)
	return bytes.Equal(rk, k), rk
}

func (t *table) len() int { return len(t.idx) + len(t.over) }

// each calls fn for every live row (tombstones skipped), in arena order (sequential memory,
// dead records skipped); the slices stay valid while the table lives.
func (t *table) each(fn func(k, v []byte) error) error {
	for _, c := range t.chunks {
		for len(c) > 0 {
			kl := binary.LittleEndian.Uint32(c)
			k := c[4 : 4+kl&^deadBit]
			c = c[4+kl&^deadBit:]
			vl := binary.LittleEndian.Uint32(c)
			if vl == tombLen {
				c = c[4:]
				continue
			}
			v := c[4 : 4+vl]
			c = c[4+vl:]
			if kl&deadBit != 0 {
				continue
			}
			if err := fn(k, v); err != nil {
				return err
			}
		}
	}
	return nil
}
