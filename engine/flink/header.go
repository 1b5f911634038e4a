package flink

import (
	"encoding/binary"
	"fmt"

	"github.com/rebucket/rebucket/engine/flink/keytype"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// The header of a canonical keyed-state stream is Flink's
// KeyedBackendSerializationProxy: i32 version (6), bool compression, the
// key serializer snapshot, i16 state count, then per state its
// StateMetaInfoSnapshot (v7): UTF name, i32 backend type, i32 option count
// {UTF, UTF}, i32 serializer count {UTF key, serializer snapshot}.
//
// A serializer snapshot (TypeSerializerSnapshotSerializationUtil) is i32 2,
// UTF snapshot class, i32 snapshot version, then a body whose length is
// not written: only the snapshot class knows it. Simple snapshots have an
// empty body; composite ones (CompositeTypeSerializerSnapshot) are i32
// 911108, i32 outer version, an outer body, i32 1333245, i32 1, i32 n and n
// nested snapshots (without the leading 2). Since the header always ends at
// the first non-zero key-group offset, the parser knows where it must end
// and finds the end of bodies it does not know by backtracking: a choice
// holds only if the rest of the header then parses to exactly that end.
// The rewrite never re-encodes the header; it copies its bytes.

// Backend state types (StateMetaInfoSnapshot.BackendStateType ordinals).
const (
	BackendKeyValue     = 0
	BackendOperator     = 1
	BackendBroadcast    = 2
	BackendPriorityQ    = 3
	BackendKeyValueV2   = 4
	keyedStreamVersion  = 6
	compositeMagic      = 911108
	nestedSnapshotMagic = 1333245
	headerParseBudget   = 200000
)

// Snapshot is a serializer snapshot as far as the header tells it.
type Snapshot struct {
	Class     string
	Version   int32
	Composite bool
	// OuterVersion and Outer are a composite's outer snapshot version and
	// body bytes (a Tuple's class name, a Row's kind flag).
	OuterVersion int32
	Outer        []byte
	Nested       []*Snapshot
	// Opaque: a body this parser does not know was skipped.
	Opaque bool
}

// NestedClasses lists the snapshot classes of the nested serializers, depth
// first (what keytype.ForSerializer takes beside the class).
func (s *Snapshot) NestedClasses() []string {
	var out []string
	var walk func(*Snapshot)
	walk = func(x *Snapshot) {
		for _, n := range x.Nested {
			out = append(out, n.Class)
			walk(n)
		}
	}
	walk(s)
	return out
}

// Spec is the snapshot as keytype.ForSpec takes it.
func (s *Snapshot) Spec() keytype.Spec {
	sp := keytype.Spec{Class: s.Class, OuterVersion: int(s.OuterVersion), Outer: s.Outer}
	if s.Composite && s.Outer == nil {
		sp.Outer = []byte{}
	}
	for _, n := range s.Nested {
		sp.Nested = append(sp.Nested, n.Spec())
	}
	return sp
}

// NamedSnapshot is one entry of a state's serializer map.
type NamedSnapshot struct {
	Key      string // KEY_SERIALIZER, NAMESPACE_SERIALIZER, VALUE_SERIALIZER, USER_KEY_SERIALIZER
	Snapshot *Snapshot
}

// StateMeta describes one keyed state of a stream; its index in the
// header is the state id that the key-group sections use.
type StateMeta struct {
	ID          int
	Name        string
	BackendType int32
	Options     [][2]string
	Serializers []NamedSnapshot
	// Raw is the byte range of this state's meta info in the header.
	Raw [2]int
}

// IsTimers tells a priority-queue state (timers), whose keys put the
// timestamp before the key.
func (s *StateMeta) IsTimers() bool { return s.BackendType == BackendPriorityQ }

// Kind is VALUE, LIST, MAP, REDUCING, AGGREGATING (the KEYED_STATE_TYPE
// option), or TIMERS for a priority queue.
func (s *StateMeta) Kind() string {
	if s.IsTimers() {
		return "TIMERS"
	}
	for _, o := range s.Options {
		if o[0] == "KEYED_STATE_TYPE" {
			return o[1]
		}
	}
	return fmt.Sprintf("backend type %d", s.BackendType)
}

// Serializer returns the snapshot class under key ("" if absent).
func (s *StateMeta) Serializer(key string) string {
	for _, n := range s.Serializers {
		if n.Key == key {
			return n.Snapshot.Class
		}
	}
	return ""
}

// StreamHeader is the parsed header of a keyed-state stream.
type StreamHeader struct {
	Version    int32
	Compressed bool
	Key        *Snapshot
	States     []*StateMeta
	// Len is the header's length in bytes.
	Len int
}

// StateByName finds a state by name.
func (h *StreamHeader) StateByName(name string) *StateMeta {
	for _, s := range h.States {
		if s.Name == name {
			return s
		}
	}
	return nil
}

type hparser struct {
	b     []byte
	end   int
	steps int
}

func (p *hparser) i32(pos int) (int32, bool) {
	if pos < 0 || pos+4 > p.end {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(p.b[pos:])), true
}

func (p *hparser) utf(pos int) (string, int, bool) {
	if pos+2 > p.end {
		return "", 0, false
	}
	n := int(binary.BigEndian.Uint16(p.b[pos:]))
	if pos+2+n > p.end {
		return "", 0, false
	}
	return string(p.b[pos+2 : pos+2+n]), pos + 2 + n, true
}

func plausibleClass(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '.' || c == '$' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

func (p *hparser) spend() bool {
	p.steps--
	return p.steps >= 0
}

// snapshot parses one serializer snapshot at pos and the rest of the
// header through next.
func (p *hparser) snapshot(pos int, lead bool, s *Snapshot, next func(int) bool) bool {
	if !p.spend() {
		return false
	}
	if lead {
		if v, ok := p.i32(pos); !ok || v != 2 {
			return false
		}
		pos += 4
	}
	cls, pos, ok := p.utf(pos)
	if !ok || !plausibleClass(cls) {
		return false
	}
	ver, ok := p.i32(pos)
	if !ok {
		return false
	}
	pos += 4
	*s = Snapshot{Class: cls, Version: ver}
	if m, ok := p.i32(pos); ok && m == compositeMagic {
		for q := pos + 8; q+12 <= p.end; q++ {
			if m, _ := p.i32(q); m != nestedSnapshotMagic {
				continue
			}
			if v, _ := p.i32(q + 4); v != 1 {
				continue
			}
			n, _ := p.i32(q + 8)
			if n < 0 || n > 64 {
				continue
			}
			s.Composite, s.Opaque = true, false
			s.OuterVersion, _ = p.i32(pos + 4)
			s.Outer = p.b[pos+8 : q : q]
			s.Nested = make([]*Snapshot, n)
			if p.nested(q+12, s.Nested, 0, next) {
				return true
			}
			if !p.spend() {
				return false
			}
		}
		s.Composite, s.Nested, s.Outer, s.OuterVersion = false, nil, nil, 0
	}
	s.Opaque = false
	if next(pos) {
		return true
	}
	s.Opaque = true
	for q := pos + 1; q <= p.end; q++ {
		if !p.spend() {
			return false
		}
		if next(q) {
			return true
		}
	}
	return false
}

func (p *hparser) nested(pos int, arr []*Snapshot, i int, next func(int) bool) bool {
	if i == len(arr) {
		return next(pos)
	}
	arr[i] = &Snapshot{}
	return p.snapshot(pos, false, arr[i], func(q int) bool { return p.nested(q, arr, i+1, next) })
}

func (p *hparser) states(pos int, arr []*StateMeta, i int) bool {
	if i == len(arr) {
		return pos == p.end
	}
	if !p.spend() {
		return false
	}
	start := pos
	name, pos, ok := p.utf(pos)
	if !ok {
		return false
	}
	typ, ok := p.i32(pos)
	if !ok || typ < 0 || typ > BackendKeyValueV2 {
		return false
	}
	pos += 4
	nOpt, ok := p.i32(pos)
	if !ok || nOpt < 0 || nOpt > 64 {
		return false
	}
	pos += 4
	st := &StateMeta{ID: i, Name: name, BackendType: typ}
	for j := 0; j < int(nOpt); j++ {
		var k, v string
		if k, pos, ok = p.utf(pos); !ok {
			return false
		}
		if v, pos, ok = p.utf(pos); !ok {
			return false
		}
		st.Options = append(st.Options, [2]string{k, v})
	}
	nSer, ok := p.i32(pos)
	if !ok || nSer < 0 || nSer > 16 {
		return false
	}
	pos += 4
	st.Serializers = make([]NamedSnapshot, nSer)
	arr[i] = st
	return p.serializers(pos, st, 0, func(q int) bool {
		st.Raw = [2]int{start, q}
		return p.states(q, arr, i+1)
	})
}

func (p *hparser) serializers(pos int, st *StateMeta, j int, next func(int) bool) bool {
	if j == len(st.Serializers) {
		return next(pos)
	}
	key, pos, ok := p.utf(pos)
	if !ok || key == "" {
		return false
	}
	s := &Snapshot{}
	st.Serializers[j] = NamedSnapshot{Key: key, Snapshot: s}
	return p.snapshot(pos, true, s, func(q int) bool { return p.serializers(q, st, j+1, next) })
}

// ParseHeader parses the header of a keyed-state stream whose first
// key-group section starts at end (the stream length if it has none).
func ParseHeader(b []byte, end int) (*StreamHeader, error) {
	if end > len(b) || end < 9 {
		return nil, fmt.Errorf("%w: keyed-state header would end at byte %d of a %d-byte stream", snapshotfmt.ErrCorrupt, end, len(b))
	}
	h := &StreamHeader{Version: int32(binary.BigEndian.Uint32(b)), Len: end}
	if h.Version != keyedStreamVersion {
		return nil, fmt.Errorf("%w: keyed-state stream version %d (Flink 1.17 and later write 6)", snapshotfmt.ErrUnsupported, h.Version)
	}
	switch b[4] {
	case 0:
	case 1:
		h.Compressed = true
	default:
		return nil, fmt.Errorf("%w: keyed-state header compression flag is %d", snapshotfmt.ErrCorrupt, b[4])
	}
	p := &hparser{b: b, end: end, steps: headerParseBudget}
	h.Key = &Snapshot{}
	ok := p.snapshot(5, true, h.Key, func(pos int) bool {
		if pos+2 > p.end {
			return false
		}
		n := int(int16(binary.BigEndian.Uint16(b[pos:])))
		if n < 0 || n > 4096 {
			return false
		}
		h.States = make([]*StateMeta, n)
		return p.states(pos+2, h.States, 0)
	})
	if !ok {
		why := "its layout does not match Flink's KeyedBackendSerializationProxy"
		if p.steps < 0 {
			why = "its serializer snapshots could not be delimited"
		}
		return nil, fmt.Errorf("%w: keyed-state header (%d bytes): %s", snapshotfmt.ErrCorrupt, end, why)
	}
	return h, nil
}
