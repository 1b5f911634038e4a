package flink

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/rebucket/rebucket/engine/flink/keytype"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// KeyedEntry is one keyed-state entry as export and locate see it.
// Slices are valid until fn returns.
type KeyedEntry struct {
	Operator *OperatorState
	Subtask  int
	State    *StateMeta
	KeyGroup int
	// Composite is the full composite key, key-group prefix included.
	Composite []byte
	// Key is the serialized key (its serializer's bytes); nil when the key
	// type is not supported (then Rest holds key and namespace).
	Key []byte
	// Timestamp is a timer's time (PRIORITY_QUEUE states only).
	Timestamp int64
	// Rest is what follows the key: the namespace, a map state's user key,
	// and the length suffixes of ambiguous keys.
	Rest  []byte
	Value []byte
	// KeyCodec decodes Key (nil when unsupported).
	KeyCodec keytype.Codec
}

// ForEachEntry calls fn for every keyed entry of the savepoint, operator
// by operator, subtask by subtask, in stream order.
func (sp *Savepoint) ForEachEntry(ctx context.Context, fn func(*KeyedEntry) error) error {
	ops, err := sp.openKeyedOps()
	if err != nil {
		return err
	}
	defer func() {
		for _, k := range ops {
			k.close()
		}
	}()
	rd := &sectionReader{}
	for _, k := range ops {
		w := keytype.PrefixBytes(int(k.op.MaxParallelism))
		for si, s := range k.streams {
			sub := subtaskOf(k.op, s.Handle)
			for _, sec := range s.Sections() {
				if err := ctx.Err(); err != nil {
					return err
				}
				_, err := s.ReadSection(sec, rd, func(e Entry) error {
					st := k.header.States[k.remap[si][e.StateID]]
					ke := &KeyedEntry{Operator: k.op, Subtask: sub, State: st, KeyGroup: sec.KeyGroup, Composite: e.Key, Value: e.Value}
					start := keyStart(st.IsTimers(), w)
					if len(e.Key) < start {
						return fmt.Errorf("%w: %s: key group %d: key %x too short for state %q", snapshotfmt.ErrCorrupt, s.Where, sec.KeyGroup, e.Key, JavaString(st.Name))
					}
					if st.IsTimers() {
						ke.Timestamp = int64(binary.BigEndian.Uint64(e.Key[w:]) ^ 1<<63)
					}
					ke.Rest = e.Key[start:]
					if k.codecErr == nil {
						n, err := k.codec.Len(e.Key[start:])
						if err != nil {
							return fmt.Errorf("%s: key group %d: %w", s.Where, sec.KeyGroup, err)
						}
						ke.Key, ke.Rest, ke.KeyCodec = e.Key[start:start+n], e.Key[start+n:], k.codec
					}
					return fn(ke)
				})
				if err != nil {
					return err
				}
			}
		}
	}
	return nil
}
