package rocksdbsst

import (
	"bytes"
	"container/heap"
	"fmt"
	"slices"
	"sort"
)

// MergeFunc combines the merge operands of key (oldest first) onto base, the
// older value when hasBase, as RocksDB's FullMergeV2 does.
type MergeFunc func(key []byte, base []byte, hasBase bool, operands [][]byte) ([]byte, error)

// StringAppend is RocksDB's StringAppendOperator: the base (if any) and the
// operands, joined with delim. An empty base counts as a base.
func StringAppend(delim []byte) MergeFunc {
	return func(_ []byte, base []byte, hasBase bool, operands [][]byte) ([]byte, error) {
		var out []byte
		have := hasBase
		if hasBase {
			out = append(out, base...)
		}
		for _, op := range operands {
			if have {
				out = append(out, delim...)
			}
			out = append(out, op...)
			have = true
		}
		return out, nil
	}
}

// Live calls fn for every live user key of the tables (the table files of one
// RocksDB version, in any order), in ascending bytewise order, with its value
// as a RocksDB read at the newest sequence number sees it: per user key the
// entry with the highest sequence number decides; a deletion, single deletion
// or covering range deletion (with a higher sequence number) hides it and all
// older entries; merge operands above a value, a deletion or nothing are
// combined by merge (nil merge refuses merge operands). The key and value
// passed to fn are valid only during the call. Equal sequence numbers of one
// user key in two tables (only sequence number 0 after compaction, which
// RocksDB never leaves overlapping) are taken in the order of tables.
func Live(tables []*Table, merge MergeFunc, fn func(key, value []byte) error) error {
	var tombs []RangeTombstone
	h := &iterHeap{}
	for i, t := range tables {
		rd, err := t.RangeDeletions()
		if err != nil {
			return fmt.Errorf("table %d: %w", i, err)
		}
		tombs = append(tombs, rd...)
		it := t.NewIter()
		if it.Next() {
			h.items = append(h.items, heapItem{it: it, order: i})
		} else if err := it.Err(); err != nil {
			return fmt.Errorf("table %d: %w", i, err)
		}
	}
	heap.Init(h)
	frags := fragment(tombs)

	var key []byte
	var operands [][]byte
	var operandBuf []byte
	for h.Len() > 0 {
		key = append(key[:0], h.items[0].it.Key().UserKey...)
		coverSeq := frags.cover(key)
		operands = operands[:0]
		operandBuf = operandBuf[:0]
		done := false
		for h.Len() > 0 {
			top := h.items[0].it
			k := top.Key()
			if !bytes.Equal(k.UserKey, key) {
				break
			}
			if !done {
				if k.Seq < coverSeq {
					// A range tombstone hides this and every older entry.
					if err := finish(key, nil, false, operands, merge, fn); err != nil {
						return err
					}
					done = true
				} else {
					switch k.Kind {
					case KindValue:
						if err := finish(key, top.Value(), true, operands, merge, fn); err != nil {
							return err
						}
						done = true
					case KindDelete, KindSingleDelete:
						if err := finish(key, nil, false, operands, merge, fn); err != nil {
							return err
						}
						done = true
					case KindMerge:
						// Operands are met newest first; keep copies since the
						// iterator reuses its buffers.
						operandBuf = append(operandBuf, top.Value()...)
						operands = append(operands, operandBuf[len(operandBuf)-len(top.Value()):len(operandBuf):len(operandBuf)])
					default:
						return unsupportedf("entry kind %s for key %x in a live read", k.Kind, key)
					}
				}
			}
			if top.Next() {
				heap.Fix(h, 0)
			} else {
				if err := top.Err(); err != nil {
					return fmt.Errorf("table %d: %w", h.items[0].order, err)
				}
				heap.Pop(h)
			}
		}
		if !done {
			if err := finish(key, nil, false, operands, merge, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish emits key: a value, the merge of operands (newest first) onto a
// value or nothing, or nothing at all when deleted without operands.
func finish(key, value []byte, hasValue bool, newestFirst [][]byte, merge MergeFunc, fn func(key, value []byte) error) error {
	if len(newestFirst) == 0 {
		if !hasValue {
			return nil
		}
		return fn(key, value)
	}
	if merge == nil {
		return unsupportedf("merge operands for key %x without a merge function", key)
	}
	ops := slices.Clone(newestFirst)
	slices.Reverse(ops)
	v, err := merge(key, value, hasValue, ops)
	if err != nil {
		return fmt.Errorf("rocksdbsst: merge of key %x: %w", key, err)
	}
	return fn(key, v)
}

type heapItem struct {
	it    *Iter
	order int
}

// iterHeap orders the current entries of the tables by internal key order:
// user key ascending, sequence number descending.
type iterHeap struct{ items []heapItem }

func (h *iterHeap) Len() int { return len(h.items) }
func (h *iterHeap) Less(i, j int) bool {
	a, b := h.items[i].it.Key(), h.items[j].it.Key()
	if c := bytes.Compare(a.UserKey, b.UserKey); c != 0 {
		return c < 0
	}
	if a.Seq != b.Seq {
		return a.Seq > b.Seq
	}
	return h.items[i].order < h.items[j].order
}
func (h *iterHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *iterHeap) Push(x any)    { h.items = append(h.items, x.(heapItem)) }
func (h *iterHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// fragments split the key space at every tombstone boundary; each fragment
// [bounds[i], bounds[i+1]) has the highest sequence number of the tombstones
// covering it.
type fragments struct {
	bounds [][]byte
	seq    []uint64
}

func fragment(ts []RangeTombstone) fragments {
	var f fragments
	if len(ts) == 0 {
		return f
	}
	for _, t := range ts {
		f.bounds = append(f.bounds, t.Start, t.End)
	}
	slices.SortFunc(f.bounds, bytes.Compare)
	f.bounds = slices.CompactFunc(f.bounds, bytes.Equal)
	f.seq = make([]uint64, len(f.bounds))
	// Sweep the bounds once with the tombstones sorted by start and a
	// max-heap of the open ones by sequence number; ended ones leave the
	// heap when they reach its top. O((T + F) log T), a damaged file with
	// many tombstones stays fast.
	idx := func(k []byte) int { i, _ := slices.BinarySearchFunc(f.bounds, k, bytes.Compare); return i }
	type span struct {
		start int
		seqOpen
	}
	spans := make([]span, 0, len(ts))
	for _, t := range ts {
		s, e := idx(t.Start), idx(t.End)
		if s < e {
			spans = append(spans, span{s, seqOpen{t.Seq, e}})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	h := &seqHeap{}
	next := 0
	for i := range f.bounds {
		for next < len(spans) && spans[next].start == i {
			heap.Push(h, spans[next].seqOpen)
			next++
		}
		for h.Len() > 0 && h.items[0].end <= i {
			heap.Pop(h)
		}
		if h.Len() > 0 {
			f.seq[i] = h.items[0].seq
		}
	}
	return f
}

// seqOpen is a tombstone open during the sweep: its sequence number and the
// index of its end bound.
type seqOpen struct {
	seq uint64
	end int
}

// seqHeap is a max-heap of open tombstones by sequence number.
type seqHeap struct{ items []seqOpen }

func (h *seqHeap) Len() int           { return len(h.items) }
func (h *seqHeap) Less(i, j int) bool { return h.items[i].seq > h.items[j].seq }
func (h *seqHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *seqHeap) Push(x any)         { h.items = append(h.items, x.(seqOpen)) }
func (h *seqHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// cover returns the highest sequence number of a tombstone covering key, 0
// if none.
func (f fragments) cover(key []byte) uint64 {
	if len(f.bounds) == 0 {
		return 0
	}
	// The fragment starting at the last bound <= key.
	i := sort.Search(len(f.bounds), func(i int) bool { return bytes.Compare(f.bounds[i], key) > 0 }) - 1
	if i < 0 {
		return 0
	}
	return f.seq[i]
}
