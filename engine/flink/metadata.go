package flink

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// The _metadata file of a checkpoint or savepoint, as Flink 2.3 writes and
// reads it (Checkpoints, MetadataV2V3SerializerBase, MetadataV3Serializer ..
// MetadataV6Serializer). Versions 3 to 6 are read; Flink 2.3 writes 6.

// MetadataMagic opens every _metadata file (Checkpoints.HEADER_MAGIC_NUMBER).
const MetadataMagic = 0x4960672d

const masterStateMagic = int32(-0x3694e96a) // 0xc96b1696

// Handle type bytes (MetadataV2V3SerializerBase).
const (
	handleNull               = 0
	handleByteStream         = 1
	handleFile               = 2
	handleKeyGroups          = 3
	handleOperatorState      = 4
	handleIncremental        = 5
	handleRelativeFile       = 6
	handleSavepointKeyGroups = 7
	handleChangelog          = 8
	handleChangelogBytes     = 9
	handleChangelogFile      = 10
	handleIncrementalV2      = 11
	handleKeyGroupsV2        = 12
	handleChangelogFileV2    = 13
	handleChangelogV2        = 14
	handleSegmentFile        = 15
	handleEmptySegmentFile   = 16
	handleSegmentOperator    = 17
)

// MaxMetadataSize bounds the _metadata file read into memory. Inline
// (ByteStreamStateHandle) state lives there, so it can be large, but a
// file above this is refused rather than read.
const MaxMetadataSize = 2 << 30

// Metadata is a decoded _metadata file. Strings hold Java's modified UTF-8
// bytes as written (JavaString converts them for display), so Encode
// reproduces the input byte for byte.
type Metadata struct {
	Version      int32
	CheckpointID int64
	MasterStates []MasterState
	Operators    []*OperatorState
	// Trailing is everything after the operator states: from version 4 on,
	// the Java-serialized CheckpointProperties. Carried verbatim.
	Trailing []byte
}

// MasterState is one master hook's state.
type MasterState struct {
	Version int32
	Name    string
	Data    []byte
}

// OperatorState is one operator's state across its subtasks.
type OperatorState struct {
	Name, UID      string // version 5 and later; "" when absent
	ID             [16]byte
	Parallelism    int32
	MaxParallelism int32
	Coordinator    *StreamHandle // always a ByteStreamStateHandle or nil
	// FullyFinished operators are written with -1 subtasks and no state.
	FullyFinished bool
	Subtasks      []*SubtaskState
}

// IDString is the OperatorID as Flink prints it: the 16 bytes in hex.
func (o *OperatorState) IDString() string { return hex.EncodeToString(o.ID[:]) }

// Label names an operator for messages: uid, else name, else id.
func (o *OperatorState) Label() string {
	switch {
	case o.UID != "":
		return fmt.Sprintf("%q (id %s)", JavaString(o.UID), o.IDString())
	case o.Name != "":
		return fmt.Sprintf("%q (id %s)", JavaString(o.Name), o.IDString())
	}
	return "id " + o.IDString()
}

// SubtaskState is one subtask's state handles.
type SubtaskState struct {
	Index    int32
	Finished bool // written as -(index+1), no body
	// Operator (non-keyed) state; nil when absent.
	ManagedOperator, RawOperator *OperatorStateHandle
	// Keyed state; nil when absent.
	ManagedKeyed, RawKeyed *KeyedHandle
	InputChannels          []ChannelHandle
	OutputChannels         []ChannelHandle
}

// StreamHandle is a stream state handle: inline bytes (type 1), an absolute
// file (2) or a file relative to the savepoint directory (6).
type StreamHandle struct {
	Type byte
	Name string // type 1: the handle name
	Data []byte // type 1: the bytes
	Path string // type 2: absolute path (URI); type 6: relative path
	Size int64  // types 2 and 6
}

// Len is the number of bytes the handle's stream holds.
func (h *StreamHandle) Len() int64 {
	if h.Type == handleByteStream {
		return int64(len(h.Data))
	}
	return h.Size
}

// Kind names the handle type for messages.
func (h *StreamHandle) Kind() string {
	switch h.Type {
	case handleByteStream:
		return "inline"
	case handleFile:
		return "file"
	case handleRelativeFile:
		return "relative-file"
	}
	return fmt.Sprintf("type %d", h.Type)
}

// KeyedHandle is a KeyGroupsSavepointStateHandle (type 7): the canonical
// keyed-state stream of one subtask, with the stream offset of every key
// group in its range (0 = the key group is empty).
type KeyedHandle struct {
	StartKeyGroup int32
	Offsets       []int64
	Delegate      *StreamHandle
}

// EndKeyGroup is the last key group of the handle's range (inclusive).
func (k *KeyedHandle) EndKeyGroup() int32 { return k.StartKeyGroup + int32(len(k.Offsets)) - 1 }

// OperatorStateHandle is an OperatorStreamStateHandle (type 4).
type OperatorStateHandle struct {
	States   []OperatorStateMeta // in the order written
	Delegate *StreamHandle
}

// Distribution modes of operator state (OperatorStateHandle.Mode).
var distributionModes = []string{"SPLIT_DISTRIBUTE", "UNION", "BROADCAST"}

// OperatorStateMeta is one named operator state inside a handle.
type OperatorStateMeta struct {
	Name    string
	Mode    byte
	Offsets []int64
}

// ModeName is the distribution mode as Flink names it.
func (m OperatorStateMeta) ModeName() string {
	if int(m.Mode) < len(distributionModes) {
		return distributionModes[m.Mode]
	}
	return fmt.Sprintf("mode %d", m.Mode)
}

// ChannelHandle is an input-channel or result-subpartition state handle
// (unaligned checkpoints; savepoints have none). Kind is the version 6
// type byte (1..4); versions 3 to 5 write no type byte and Kind is 0.
type ChannelHandle struct {
	Kind          byte
	Subtask       int32
	Info          [2]int32 // gate/channel or partition/subpartition
	Offsets       []int64
	Size          int64
	Delegate      *StreamHandle
	MergedOffsets []byte // kinds 3 and 4
}

// ErrNative marks state handles of a native (non-canonical) savepoint or a
// checkpoint: RocksDB incremental files, changelog, file merging, the heap
// backend's native key-group files. It wraps snapshotfmt.ErrUnsupported.
var ErrNative = fmt.Errorf("%w: not a canonical Flink savepoint", snapshotfmt.ErrUnsupported)

const canonicalHint = "take a canonical savepoint first: `flink stop --type canonical JOB` (or `flink savepoint --type canonical JOB`), and give that one"

func nativeError(what string) error {
	return fmt.Errorf("%w: it holds %s; %s", ErrNative, what, canonicalHint)
}

// DecodeMetadata decodes a _metadata file. Damage is an error wrapping
// snapshotfmt.ErrCorrupt; native or unknown handle types wrap
// snapshotfmt.ErrUnsupported (ErrNative).
func DecodeMetadata(b []byte) (*Metadata, error) {
	d := &dec{b: b, what: "_metadata"}
	if len(b) < 8 {
		return nil, fmt.Errorf("%w: _metadata is %d bytes, too short for a Flink checkpoint header", snapshotfmt.ErrCorrupt, len(b))
	}
	if m := d.i32(); m != MetadataMagic {
		return nil, fmt.Errorf("%w: _metadata does not start with Flink's magic number 0x4960672d (found %#08x)", snapshotfmt.ErrCorrupt, uint32(m))
	}
	md := &Metadata{Version: d.i32()}
	if md.Version < 3 || md.Version > 6 {
		return nil, fmt.Errorf("%w: _metadata version %d (this build reads versions 3 to 6, written by Flink 1.11 to 2.3)", snapshotfmt.ErrUnsupported, md.Version)
	}
	md.CheckpointID = d.i64()
	if d.err == nil && md.CheckpointID < 0 {
		d.fail("negative checkpoint id %d", md.CheckpointID)
	}
	n := d.count(12, "master state")
	for i := 0; i < n && d.err == nil; i++ {
		md.MasterStates = append(md.MasterStates, d.masterState())
	}
	n = d.count(24, "operator state")
	for i := 0; i < n && d.err == nil; i++ {
		op, err := d.operatorState(md.Version)
		if err != nil {
			return nil, err
		}
		md.Operators = append(md.Operators, op)
	}
	if d.err != nil {
		return nil, d.err
	}
	md.Trailing = b[d.pos:len(b):len(b)]
	return md, nil
}

func (d *dec) masterState() MasterState {
	if m := d.i32(); d.err == nil && m != masterStateMagic {
		d.fail("master state magic number %#08x, want 0xc96b1696", uint32(m))
	}
	n := d.i32()
	if d.err == nil && n <= 0 {
		d.fail("master state length %d", n)
	}
	body := d.bytes(int(n))
	if d.err != nil {
		return MasterState{}
	}
	in := &dec{b: body, what: "master state"}
	ms := MasterState{Version: in.i32(), Name: in.utf()}
	ms.Data = in.bytes(int(in.i32()))
	if in.err == nil && in.pos != len(body) {
		in.fail("%d trailing bytes", len(body)-in.pos)
	}
	if in.err != nil {
		d.err = in.err
	}
	return ms
}

func (d *dec) operatorState(version int32) (*OperatorState, error) {
	op := &OperatorState{}
	if version >= 5 {
		op.Name = d.utf()
		op.UID = d.utf()
	}
	copy(op.ID[:], d.bytes(16))
	op.Parallelism = d.i32()
	op.MaxParallelism = d.i32()
	coord, err := d.streamHandle()
	if err != nil {
		return nil, err
	}
	if coord != nil && coord.Type != handleByteStream {
		d.fail("coordinator state of operator %s is a %s handle, Flink only writes inline ones", op.Label(), coord.Kind())
	}
	op.Coordinator = coord
	n := d.i32()
	if d.err != nil {
		return nil, d.err
	}
	if n < 0 {
		if coord != nil {
			d.fail("fully finished operator %s has coordinator state", op.Label())
		}
		op.FullyFinished = true
		return op, d.err
	}
	if int64(n)*4 > int64(len(d.b)-d.pos) {
		d.fail("subtask count %d does not fit", n)
		return nil, d.err
	}
	// Flink's OperatorState.putState refuses a subtask index outside
	// 0..parallelism-1, and keeps one state per index; a damaged index
	// would otherwise be read (and dropped by a rewrite) without a word.
	seen := make(map[int32]bool, n)
	for i := int32(0); i < n && d.err == nil; i++ {
		st := &SubtaskState{}
		idx := d.i32()
		st.Index = idx
		if idx < 0 {
			st.Index, st.Finished = -idx-1, true
		}
		if d.err == nil && (st.Index < 0 || st.Index >= op.Parallelism || seen[st.Index]) {
			what := fmt.Sprintf("outside 0..%d (the operator's parallelism is %d)", op.Parallelism-1, op.Parallelism)
			if seen[st.Index] {
				what = "given twice"
			}
			d.fail("operator %s: subtask index %d %s", op.Label(), st.Index, what)
			return nil, d.err
		}
		seen[st.Index] = true
		if st.Finished {
			op.Subtasks = append(op.Subtasks, st)
			continue
		}
		if err := d.subtaskState(version, st); err != nil {
			return nil, fmt.Errorf("operator %s subtask %d: %w", op.Label(), idx, err)
		}
		op.Subtasks = append(op.Subtasks, st)
	}
	if d.err != nil {
		return nil, d.err
	}
	return op, nil
}

func (d *dec) subtaskState(version int32, st *SubtaskState) error {
	var err error
	if d.i32() != 0 {
		if st.ManagedOperator, err = d.operatorStateHandle(); err != nil {
			return err
		}
	}
	if d.i32() != 0 {
		if st.RawOperator, err = d.operatorStateHandle(); err != nil {
			return err
		}
	}
	if st.ManagedKeyed, err = d.keyedHandle(); err != nil {
		return err
	}
	if st.RawKeyed, err = d.keyedHandle(); err != nil {
		return err
	}
	if st.InputChannels, err = d.channelHandles(version); err != nil {
		return err
	}
	if st.OutputChannels, err = d.channelHandles(version); err != nil {
		return err
	}
	return d.err
}

func (d *dec) streamHandle() (*StreamHandle, error) {
	t := d.u8()
	if d.err != nil {
		return nil, d.err
	}
	switch t {
	case handleNull:
		return nil, nil
	case handleByteStream:
		h := &StreamHandle{Type: t, Name: d.utf()}
		n := d.i32()
		if d.err == nil && n < 0 {
			d.fail("negative inline state length %d", n)
		}
		h.Data = d.bytes(int(n))
		return h, d.err
	case handleFile:
		h := &StreamHandle{Type: t, Size: d.i64(), Path: d.utf()}
		return h, d.err
	case handleRelativeFile:
		h := &StreamHandle{Type: t, Path: d.utf(), Size: d.i64()}
		return h, d.err
	case handleKeyGroups:
		return nil, nativeError("a native key-group stream handle (type 3)")
	case handleSegmentFile, handleEmptySegmentFile:
		return nil, nativeError(fmt.Sprintf("a file-merging segment handle (type %d)", t))
	}
	return nil, fmt.Errorf("%w: unknown stream state handle type %d at byte %d of _metadata", snapshotfmt.ErrUnsupported, t, d.pos-1)
}

func (d *dec) keyedHandle() (*KeyedHandle, error) {
	t := d.u8()
	if d.err != nil {
		return nil, d.err
	}
	switch t {
	case handleNull:
		return nil, nil
	case handleSavepointKeyGroups:
		k := &KeyedHandle{StartKeyGroup: d.i32()}
		n := d.i32()
		if d.err == nil && (n < 0 || int64(n)*8 > int64(len(d.b)-d.pos) || k.StartKeyGroup < 0 || int64(k.StartKeyGroup)+int64(n) > 32768) {
			d.fail("key-group range start %d, %d key groups", k.StartKeyGroup, n)
		}
		if d.err != nil {
			return nil, d.err
		}
		k.Offsets = make([]int64, n)
		for i := range k.Offsets {
			k.Offsets[i] = d.i64()
		}
		h, err := d.streamHandle()
		if err != nil {
			return nil, err
		}
		if h == nil && d.err == nil {
			d.fail("keyed state handle without a stream")
		}
		k.Delegate = h
		return k, d.err
	case handleKeyGroups, handleKeyGroupsV2:
		return nil, nativeError(fmt.Sprintf("native heap key-group state (KeyGroupsStateHandle, type %d)", t))
	case handleIncremental, handleIncrementalV2:
		return nil, nativeError(fmt.Sprintf("RocksDB incremental/native state (IncrementalRemoteKeyedStateHandle, type %d)", t))
	case handleChangelog, handleChangelogBytes, handleChangelogFile, handleChangelogFileV2, handleChangelogV2:
		return nil, nativeError(fmt.Sprintf("changelog state (type %d)", t))
	case handleSegmentFile, handleEmptySegmentFile, handleSegmentOperator:
		return nil, nativeError(fmt.Sprintf("file-merging state (type %d)", t))
	}
	return nil, fmt.Errorf("%w: unknown keyed state handle type %d at byte %d of _metadata", snapshotfmt.ErrUnsupported, t, d.pos-1)
}

func (d *dec) operatorStateHandle() (*OperatorStateHandle, error) {
	t := d.u8()
	if d.err != nil {
		return nil, d.err
	}
	switch t {
	case handleNull:
		return nil, nil
	case handleOperatorState:
	case handleSegmentOperator:
		return nil, nativeError("file-merging operator state (type 17)")
	default:
		return nil, fmt.Errorf("%w: unknown operator state handle type %d at byte %d of _metadata", snapshotfmt.ErrUnsupported, t, d.pos-1)
	}
	h := &OperatorStateHandle{}
	n := d.count(7, "operator state name")
	for i := 0; i < n && d.err == nil; i++ {
		m := OperatorStateMeta{Name: d.utf(), Mode: d.u8()}
		if d.err == nil && int(m.Mode) >= len(distributionModes) {
			d.fail("operator state %q has distribution mode %d", JavaString(m.Name), m.Mode)
		}
		c := d.count(8, "operator state offset")
		if d.err == nil {
			m.Offsets = make([]int64, c)
			for j := range m.Offsets {
				m.Offsets[j] = d.i64()
			}
		}
		h.States = append(h.States, m)
	}
	if d.err != nil {
		return nil, d.err
	}
	var err error
	if h.Delegate, err = d.streamHandle(); err != nil {
		return nil, err
	}
	return h, d.err
}

func (d *dec) channelHandles(version int32) ([]ChannelHandle, error) {
	n := d.count(21, "channel state handle")
	var out []ChannelHandle
	for i := 0; i < n && d.err == nil; i++ {
		var c ChannelHandle
		if version >= 6 {
			c.Kind = d.u8()
			if d.err == nil && (c.Kind < 1 || c.Kind > 4) {
				d.fail("channel state handle type %d", c.Kind)
			}
		}
		if c.Kind == 3 || c.Kind == 4 {
			c.Subtask = d.i32()
			c.Size = d.i64()
			h, err := d.streamHandle()
			if err != nil {
				return nil, err
			}
			c.Delegate = h
			m := d.i32()
			if d.err == nil && m < 0 {
				d.fail("negative merged channel offsets length")
			}
			c.MergedOffsets = d.bytes(int(m))
		} else {
			c.Subtask = d.i32()
			c.Info = [2]int32{d.i32(), d.i32()}
			k := d.count(8, "channel offset")
			if d.err == nil {
				c.Offsets = make([]int64, k)
				for j := range c.Offsets {
					c.Offsets[j] = d.i64()
				}
			}
			c.Size = d.i64()
			h, err := d.streamHandle()
			if err != nil {
				return nil, err
			}
			c.Delegate = h
		}
		out = append(out, c)
	}
	return out, d.err
}

// Encode writes the metadata as Flink does (same version as read).
func (md *Metadata) Encode() ([]byte, error) {
	if md.Version < 3 || md.Version > 6 {
		return nil, fmt.Errorf("%w: cannot write _metadata version %d", snapshotfmt.ErrInvalidArgument, md.Version)
	}
	e := &enc{}
	e.i32(MetadataMagic)
	e.i32(md.Version)
	e.i64(md.CheckpointID)
	e.i32(int32(len(md.MasterStates)))
	for _, ms := range md.MasterStates {
		in := &enc{}
		in.i32(ms.Version)
		if err := in.utf(ms.Name); err != nil {
			return nil, err
		}
		in.i32(int32(len(ms.Data)))
		in.raw(ms.Data)
		e.i32(masterStateMagic)
		e.i32(int32(len(in.b)))
		e.raw(in.b)
	}
	e.i32(int32(len(md.Operators)))
	for _, op := range md.Operators {
		if err := e.operatorState(md.Version, op); err != nil {
			return nil, fmt.Errorf("operator %s: %w", op.Label(), err)
		}
	}
	e.raw(md.Trailing)
	return e.b, nil
}

func (e *enc) operatorState(version int32, op *OperatorState) error {
	if version >= 5 {
		if err := errors.Join(e.utf(op.Name), e.utf(op.UID)); err != nil {
			return err
		}
	} else if op.Name != "" || op.UID != "" {
		return fmt.Errorf("%w: _metadata version %d has no operator names or uids", snapshotfmt.ErrInvalidArgument, version)
	}
	e.raw(op.ID[:])
	e.i32(op.Parallelism)
	e.i32(op.MaxParallelism)
	if err := e.streamHandle(op.Coordinator); err != nil {
		return err
	}
	if op.FullyFinished {
		e.i32(-1)
		return nil
	}
	e.i32(int32(len(op.Subtasks)))
	for _, st := range op.Subtasks {
		if st.Finished {
			e.i32(-st.Index - 1)
			continue
		}
		e.i32(st.Index)
		for _, h := range []*OperatorStateHandle{st.ManagedOperator, st.RawOperator} {
			if h == nil {
				e.i32(0)
				continue
			}
			e.i32(1)
			if err := e.operatorStateHandle(h); err != nil {
				return err
			}
		}
		for _, k := range []*KeyedHandle{st.ManagedKeyed, st.RawKeyed} {
			if err := e.keyedHandle(k); err != nil {
				return err
			}
		}
		for _, cs := range [][]ChannelHandle{st.InputChannels, st.OutputChannels} {
			if err := e.channelHandles(version, cs); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *enc) streamHandle(h *StreamHandle) error {
	if h == nil {
		e.u8(handleNull)
		return nil
	}
	e.u8(h.Type)
	switch h.Type {
	case handleByteStream:
		if err := e.utf(h.Name); err != nil {
			return err
		}
		e.i32(int32(len(h.Data)))
		e.raw(h.Data)
	case handleFile:
		e.i64(h.Size)
		return e.utf(h.Path)
	case handleRelativeFile:
		if err := e.utf(h.Path); err != nil {
			return err
		}
		e.i64(h.Size)
	default:
		return fmt.Errorf("%w: cannot write stream handle type %d", snapshotfmt.ErrInvalidArgument, h.Type)
	}
	return nil
}

func (e *enc) keyedHandle(k *KeyedHandle) error {
	if k == nil {
		e.u8(handleNull)
		return nil
	}
	if k.Delegate == nil {
		return fmt.Errorf("%w: keyed state handle without a stream", snapshotfmt.ErrInvalidArgument)
	}
	e.u8(handleSavepointKeyGroups)
	e.i32(k.StartKeyGroup)
	e.i32(int32(len(k.Offsets)))
	for _, o := range k.Offsets {
		e.i64(o)
	}
	return e.streamHandle(k.Delegate)
}

func (e *enc) operatorStateHandle(h *OperatorStateHandle) error {
	e.u8(handleOperatorState)
	e.i32(int32(len(h.States)))
	for _, m := range h.States {
		if err := e.utf(m.Name); err != nil {
			return err
		}
		e.u8(m.Mode)
		e.i32(int32(len(m.Offsets)))
		for _, o := range m.Offsets {
			e.i64(o)
		}
	}
	return e.streamHandle(h.Delegate)
}

func (e *enc) channelHandles(version int32, cs []ChannelHandle) error {
	e.i32(int32(len(cs)))
	for _, c := range cs {
		if version >= 6 {
			e.u8(c.Kind)
		} else if c.Kind != 0 {
			return fmt.Errorf("%w: channel handle kind %d in _metadata version %d", snapshotfmt.ErrInvalidArgument, c.Kind, version)
		}
		if c.Kind == 3 || c.Kind == 4 {
			e.i32(c.Subtask)
			e.i64(c.Size)
			if err := e.streamHandle(c.Delegate); err != nil {
				return err
			}
			e.i32(int32(len(c.MergedOffsets)))
			e.raw(c.MergedOffsets)
			continue
		}
		e.i32(c.Subtask)
		e.i32(c.Info[0])
		e.i32(c.Info[1])
		e.i32(int32(len(c.Offsets)))
		for _, o := range c.Offsets {
			e.i64(o)
		}
		e.i64(c.Size)
		if err := e.streamHandle(c.Delegate); err != nil {
			return err
		}
	}
	return nil
}
