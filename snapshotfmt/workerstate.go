package snapshotfmt

import (
	"encoding/binary"
	"fmt"
)

// Per-worker state files hold a sequence of items, each a 4-byte big-endian
// length followed by that many bytes. The file has no header: its identity
// (state, worker, rule, item count) is in the manifest.

// MaxWorkerItemLen bounds one per-worker item.
const MaxWorkerItemLen = 256 << 20

// AppendWorkerItem appends one length-prefixed item.
func AppendWorkerItem(dst, item []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(item)))
	return append(dst, item...)
}

// EncodeWorkerItems encodes a whole per-worker state file.
func EncodeWorkerItems(items [][]byte) []byte {
	n := 0
	for _, it := range items {
		n += 4 + len(it)
	}
	out := make([]byte, 0, n)
	for _, it := range items {
		out = AppendWorkerItem(out, it)
	}
	return out
}

// DecodeWorkerItems splits a per-worker state file into its items. The items
// alias data. It never panics; a length past the end is ErrCorrupt.
func DecodeWorkerItems(data []byte) ([][]byte, error) {
	var items [][]byte
	for off := 0; off < len(data); {
		if len(data)-off < 4 {
			return nil, fmt.Errorf("%w: per-worker item at offset %d: %d trailing bytes, need a 4-byte length", ErrCorrupt, off, len(data)-off)
		}
		n := binary.BigEndian.Uint32(data[off:])
		off += 4
		if uint64(n) > uint64(len(data)-off) {
			return nil, fmt.Errorf("%w: per-worker item at offset %d claims %d bytes, %d remain", ErrCorrupt, off-4, n, len(data)-off)
		}
		items = append(items, data[off:off+int(n):off+int(n)])
		off += int(n)
	}
	return items, nil
}

// Redistribute deals per-worker items (old[i] is old worker i's list) to a
// new width by their rule. At an unchanged width every worker keeps its own
// items, whatever the rule (as engines do on a restart at the same width).
// Otherwise: split concatenates the items in order of old worker, then
// item, and gives item i to new worker i mod width; union gives every
// worker all items; broadcast gives every worker old worker 0's copy.
// The item slices are shared, not copied.
func Redistribute(rule Rule, old [][][]byte, width int) [][][]byte {
	out := make([][][]byte, width)
	if len(old) == width {
		copy(out, old)
		return out
	}
	var all [][]byte
	if rule != RuleBroadcast {
		for _, items := range old {
			all = append(all, items...)
		}
	}
	for i := range out {
		switch rule {
		case RuleSplit:
			for j := i; j < len(all); j += width {
				out[i] = append(out[i], all[j])
			}
		case RuleUnion:
			out[i] = all
		default:
			if len(old) > 0 {
				out[i] = old[0]
			}
		}
	}
	return out
}
