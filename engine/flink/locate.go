package flink

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/rebucket/rebucket/engine/flink/keytype"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Located is where one key lives in one keyed operator.
type Located struct {
	Operator *OperatorState
	KeyType  string
	KeyGroup int
	// Subtask holds the key group's handle in this savepoint (-1: none).
	Subtask int
	Entries []LocatedEntry
}

// LocatedEntry is one entry of the key.
type LocatedEntry struct {
	State     string
	Kind      string
	Timestamp int64  // timers
	Rest      []byte // namespace and user key bytes
	Value     []byte
}

// Locate finds the entries of a key (its serialized bytes, as
// keytype.Codec.Encode makes them) in every keyed operator whose key type
// is codec's. Only the key group's section is read.
func (sp *Savepoint) Locate(ctx context.Context, codec keytype.Codec, key []byte) ([]Located, error) {
	n, h, err := keytype.LenHash(codec, key)
	if err != nil {
		return nil, err
	}
	if n != len(key) {
		return nil, fmt.Errorf("%w: key has %d trailing bytes", snapshotfmt.ErrInvalidArgument, len(key)-n)
	}
	ops, err := sp.openKeyedOps()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, k := range ops {
			k.close()
		}
	}()
	var out []Located
	rd := &sectionReader{}
	for _, k := range ops {
		if k.codecErr != nil || k.codec.Name() != codec.Name() {
			continue
		}
		m := int(k.op.MaxParallelism)
		w := keytype.PrefixBytes(m)
		loc := Located{Operator: k.op, KeyType: k.codec.Name(), KeyGroup: keytype.KeyGroup(h, m), Subtask: -1}
		for si, s := range k.streams {
			hd := s.Handle
			if loc.KeyGroup < int(hd.StartKeyGroup) || loc.KeyGroup > int(hd.EndKeyGroup()) {
				continue
			}
			loc.Subtask = subtaskOf(k.op, hd)
			for _, sec := range s.Sections() {
				if sec.KeyGroup != loc.KeyGroup {
					continue
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				_, err := s.ReadSection(sec, rd, func(e Entry) error {
					st := k.header.States[k.remap[si][e.StateID]]
					start := keyStart(st.IsTimers(), w)
					if len(e.Key) < start+len(key) || !bytes.Equal(e.Key[start:start+len(key)], key) {
						return nil
					}
					le := LocatedEntry{State: JavaString(st.Name), Kind: st.Kind(), Rest: bytes.Clone(e.Key[start+len(key):]), Value: bytes.Clone(e.Value)}
					if st.IsTimers() {
						le.Timestamp = int64(binary.BigEndian.Uint64(e.Key[w:]) ^ 1<<63)
					}
					loc.Entries = append(loc.Entries, le)
					return nil
				})
				if err != nil {
					return nil, err
				}
			}
		}
		out = append(out, loc)
	}
	return out, nil
}
