package reader

// The dataset view: a snapshot (or a filtered part of it) as Arrow record
// batches, the shape export writes to Parquet, Arrow IPC and JSON Lines.
//
// Columns, in order:
//
//	bucket   uint32                     the entry's bucket in this snapshot
//	step     dictionary<int32, utf8>    the state's step
//	state    dictionary<int32, utf8>    the state's name
//	key      binary                     the key bytes
//	sub_key  binary, nullable           the map sub-key; null unless map state
//	value    binary                     the value bytes
//
// followed by decoded columns, one per (field, codec) pair that at least one
// selected state declares: key_utf8, key_int64, key_json, sub_key_utf8, ...,
// value_int64, value_json. utf8 and json decode to strings, int64 (8 bytes,
// big-endian) to int64. A decoded column is null on every row whose state
// lacks that hint, and on a row whose bytes do not decode (invalid UTF-8, a
// value that is not 8 bytes, invalid JSON): the raw bytes are always there,
// so decoding never loses or invents data.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"unicode/utf8"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Base column names of the dataset view.
const (
	ColBucket = "bucket"
	ColStep   = "step"
	ColState  = "state"
	ColKey    = "key"
	ColSubKey = "sub_key"
	ColValue  = "value"
)

// DefaultBatchRows is the default row count of one record batch.
const DefaultBatchRows = 64 << 10

// ArrowOptions select and shape the batches. The zero value yields every
// entry in batches of DefaultBatchRows, reading GOMAXPROCS files at a time.
type ArrowOptions struct {
	// States keeps only these states (STEP/NAME); empty keeps all.
	States []string
	// BucketRange keeps only buckets BucketLo..BucketHi (inclusive).
	BucketRange        bool
	BucketLo, BucketHi uint32
	// Width > 0 keeps only the buckets worker Worker of Width owns
	// (intersected with BucketRange).
	Worker, Width int
	// BatchRows is the row count of a batch (the last of a file may be
	// shorter).
	BatchRows int
	// Parallelism is how many files are read at once. Memory is bounded by
	// about 2*Parallelism batches.
	Parallelism int
	// Mem allocates the arrays; default memory.DefaultAllocator.
	Mem memory.Allocator
}

// DecodedColumn is one decoded column of the view.
type DecodedColumn struct {
	Name  string
	Field string // ColKey, ColSubKey or ColValue
	Codec string // utf8, int64 or json
}

// decodedCodecs are the codecs that give a decoded column, in column order.
var decodedCodecs = []string{"utf8", "int64", "json"}

// DecodedColumns returns the decoded columns the given states call for.
func DecodedColumns(states []snapshotfmt.State) []DecodedColumn {
	var out []DecodedColumn
	for _, field := range []string{ColKey, ColSubKey, ColValue} {
		for _, c := range decodedCodecs {
			for _, s := range states {
				if stateCodec(s, field) == c {
					out = append(out, DecodedColumn{Name: field + "_" + c, Field: field, Codec: c})
					break
				}
			}
		}
	}
	return out
}

func stateCodec(s snapshotfmt.State, field string) string {
	switch field {
	case ColKey:
		return s.KeyCodec
	case ColSubKey:
		return s.SubKeyCodec
	}
	return s.ValueCodec
}

// DictType is the type of the step and state columns.
var DictType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// ArrowSchema is the schema of the view over the given states.
func ArrowSchema(states []snapshotfmt.State) *arrow.Schema {
	fields := []arrow.Field{
		{Name: ColBucket, Type: arrow.PrimitiveTypes.Uint32},
		{Name: ColStep, Type: DictType},
		{Name: ColState, Type: DictType},
		{Name: ColKey, Type: arrow.BinaryTypes.Binary},
		{Name: ColSubKey, Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: ColValue, Type: arrow.BinaryTypes.Binary},
	}
	for _, d := range DecodedColumns(states) {
		t := arrow.DataType(arrow.BinaryTypes.String)
		if d.Codec == "int64" {
			t = arrow.PrimitiveTypes.Int64
		}
		fields = append(fields, arrow.Field{Name: d.Name, Type: t, Nullable: true})
	}
	return arrow.NewSchema(fields, nil)
}

// SelectStates resolves STEP/NAME names against the manifest (all states
// when names is empty), in states-table order.
func SelectStates(m *snapshotfmt.Manifest, names []string) ([]snapshotfmt.State, error) {
	if len(names) == 0 {
		return append([]snapshotfmt.State(nil), m.States...), nil
	}
	want := map[string]bool{}
	for _, n := range names {
		if _, ok := m.StateByName(n); !ok {
			var have []string
			for _, s := range m.States {
				have = append(have, s.QualifiedName())
			}
			return nil, fmt.Errorf("%w: state %q is not in the snapshot (it has %v)", snapshotfmt.ErrInvalidArgument, n, have)
		}
		want[n] = true
	}
	var out []snapshotfmt.State
	for _, s := range m.States {
		if want[s.QualifiedName()] {
			out = append(out, s)
		}
	}
	return out, nil
}

// RecordReader yields the record batches of a view. Batches come in key
// order (file by file) although files are read in parallel.
type RecordReader struct {
	schema *arrow.Schema
	states []snapshotfmt.State
	cancel context.CancelFunc
	order  chan chan batchOrErr
	cur    chan batchOrErr
	rec    arrow.Record
	err    error
	wg     sync.WaitGroup
	rows   uint64
	est    uint64
	estB   uint64
}

type batchOrErr struct {
	rec arrow.Record
	err error
}

// viewPlan is what every file producer shares.
type viewPlan struct {
	s         *Snapshot
	schema    *arrow.Schema
	mem       memory.Allocator
	batchRows int
	lo, hi    uint32
	// byID maps a selected state id to its row in the dictionaries and its
	// decoded columns; unselected ids are absent.
	byID    map[uint16]*stateView
	stepD   arrow.Array
	stateD  arrow.Array
	decoded []DecodedColumn
}

type stateView struct {
	stepIdx, stateIdx int32
	kind              snapshotfmt.Kind
	decode            []bool // per decoded column
}

// NewRecordReader starts reading the view. Close it when done.
func (s *Snapshot) NewRecordReader(ctx context.Context, opts ArrowOptions) (*RecordReader, error) {
	states, err := SelectStates(s.m, opts.States)
	if err != nil {
		return nil, err
	}
	lo, hi := uint32(0), s.m.Partitioning.Buckets-1
	if opts.BucketRange {
		if opts.BucketLo > opts.BucketHi || opts.BucketHi >= s.m.Partitioning.Buckets {
			return nil, fmt.Errorf("%w: bucket range %d-%d outside 0-%d", snapshotfmt.ErrInvalidArgument, opts.BucketLo, opts.BucketHi, s.m.Partitioning.Buckets-1)
		}
		lo, hi = opts.BucketLo, opts.BucketHi
	}
	empty := false
	if opts.Width > 0 {
		if opts.Worker < 0 || opts.Worker >= opts.Width {
			return nil, fmt.Errorf("%w: worker %d of width %d", snapshotfmt.ErrInvalidArgument, opts.Worker, opts.Width)
		}
		wlo, whi, ok := s.WorkerBuckets(opts.Worker, opts.Width)
		lo, hi = max(lo, wlo), min(hi, whi)
		empty = !ok || lo > hi
	}
	if opts.BatchRows <= 0 {
		opts.BatchRows = DefaultBatchRows
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	if opts.Mem == nil {
		opts.Mem = memory.DefaultAllocator
	}
	p := &viewPlan{
		s: s, schema: ArrowSchema(states), mem: opts.Mem, batchRows: opts.BatchRows,
		lo: lo, hi: hi, byID: map[uint16]*stateView{}, decoded: DecodedColumns(states),
	}
	// Fixed dictionaries shared by every batch: the IPC file format forbids
	// a dictionary that changes between batches.
	sb := array.NewStringBuilder(opts.Mem)
	defer sb.Release()
	steps := map[string]int32{}
	var stepNames []string
	for _, st := range states {
		if _, ok := steps[st.Step]; !ok {
			steps[st.Step] = int32(len(stepNames))
			stepNames = append(stepNames, st.Step)
		}
	}
	sb.AppendValues(stepNames, nil)
	p.stepD = sb.NewArray()
	for i, st := range states {
		sv := &stateView{stepIdx: steps[st.Step], stateIdx: int32(i), kind: st.Kind, decode: make([]bool, len(p.decoded))}
		for j, d := range p.decoded {
			sv.decode[j] = stateCodec(st, d.Field) == d.Codec
		}
		p.byID[st.ID] = sv
		sb.Append(st.Name)
	}
	p.stateD = sb.NewArray()

	var files []snapshotfmt.DataFile
	var est, estB uint64
	if !empty {
		files = s.FilesIn(lo, hi)
		for b := lo; b <= hi; b++ {
			est += s.m.BucketEntries[b]
			estB += s.m.BucketBytes[b]
		}
		if len(states) < len(s.m.States) {
			// Scale by the selected states' share: an estimate for progress.
			var sel, all uint64
			for _, st := range states {
				sel += st.Entries
			}
			all = s.m.TotalEntries()
			if all > 0 {
				est = uint64(float64(est) * float64(sel) / float64(all))
				estB = uint64(float64(estB) * float64(sel) / float64(all))
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	rr := &RecordReader{schema: p.schema, states: states, cancel: cancel, est: est, estB: estB,
		order: make(chan chan batchOrErr, opts.Parallelism)}
	rr.wg.Add(1)
	go func() {
		defer rr.wg.Done()
		defer close(rr.order)
		defer p.stepD.Release()
		defer p.stateD.Release()
		var fw sync.WaitGroup
		defer fw.Wait()
		for _, df := range files {
			ch := make(chan batchOrErr, 1)
			select {
			case rr.order <- ch: // blocks while Parallelism files are ahead of the reader
			case <-ctx.Done():
				return
			}
			fw.Add(1)
			go func() {
				defer fw.Done()
				defer close(ch)
				p.produce(ctx, df, ch)
			}()
		}
	}()
	return rr, nil
}

// Schema is the schema of every batch.
func (rr *RecordReader) Schema() *arrow.Schema { return rr.schema }

// States are the selected states, in dictionary order of the state column.
func (rr *RecordReader) States() []snapshotfmt.State { return rr.states }

// EstimatedRows is the expected row count, for progress.
func (rr *RecordReader) EstimatedRows() uint64 { return rr.est }

// EstimatedBytes is the expected logical size (encoded keys plus values,
// as the manifest counts them), for progress.
func (rr *RecordReader) EstimatedBytes() uint64 { return rr.estB }

// LogicalBytes is the logical size of the rows of a view batch: what the
// entries take as encoded keys plus values.
func LogicalBytes(rec arrow.Record) int64 {
	n := int64(snapshotfmt.KeyHeaderLen) * rec.NumRows()
	for _, c := range []int{3, 4, 5} {
		n += int64(len(rec.Column(c).(*array.Binary).ValueBytes()))
	}
	return n
}

// Rows is the count of rows yielded so far.
func (rr *RecordReader) Rows() uint64 { return rr.rows }

// Next advances to the next batch, releasing the previous one.
func (rr *RecordReader) Next() bool {
	if rr.rec != nil {
		rr.rec.Release()
		rr.rec = nil
	}
	for rr.err == nil {
		if rr.cur == nil {
			ch, ok := <-rr.order
			if !ok {
				return false
			}
			rr.cur = ch
		}
		b, ok := <-rr.cur
		if !ok {
			rr.cur = nil
			continue
		}
		if b.err != nil {
			rr.err = b.err
			rr.cancel()
			return false
		}
		rr.rec = b.rec
		rr.rows += uint64(b.rec.NumRows())
		return true
	}
	return false
}

// Record is the current batch; valid until Next or Close (Retain it to keep
// it longer).
func (rr *RecordReader) Record() arrow.Record { return rr.rec }

// Err is the error that stopped reading.
func (rr *RecordReader) Err() error { return rr.err }

// Close stops the producers and releases every batch not yet consumed.
func (rr *RecordReader) Close() {
	rr.cancel()
	if rr.rec != nil {
		rr.rec.Release()
		rr.rec = nil
	}
	drain := func(ch chan batchOrErr) {
		for b := range ch {
			if b.rec != nil {
				b.rec.Release()
			}
		}
	}
	if rr.cur != nil {
		drain(rr.cur)
	}
	for ch := range rr.order {
		drain(ch)
	}
	rr.wg.Wait()
}

// produce reads one file into batches.
func (p *viewPlan) produce(ctx context.Context, df snapshotfmt.DataFile, out chan<- batchOrErr) {
	send := func(b batchOrErr) bool {
		select {
		case out <- b:
			return true
		case <-ctx.Done():
			if b.rec != nil {
				b.rec.Release()
			}
			return false
		}
	}
	var lower, upper []byte
	if df.BucketLo < p.lo {
		lower = snapshotfmt.BucketPrefix(p.lo)
	}
	if df.BucketHi > p.hi {
		upper = snapshotfmt.BucketUpperBound(p.hi)
	}
	fi, err := p.s.OpenFile(ctx, df, lower, upper)
	if err != nil {
		send(batchOrErr{err: err})
		return
	}
	defer fi.Close()
	bb := newBatchBuilder(p)
	defer bb.release()
	for fi.Next() {
		dk, err := snapshotfmt.DecodeKey(fi.Key())
		if err != nil {
			send(batchOrErr{err: fmt.Errorf("%s: %w", df.Path, err)})
			return
		}
		sv, ok := p.byID[dk.State]
		if !ok {
			if _, known := p.s.m.StateByID(dk.State); !known {
				send(batchOrErr{err: fmt.Errorf("%w: %s: entry %x has state id %d, which is not in the states table", snapshotfmt.ErrCorrupt, df.Path, fi.Key(), dk.State)})
				return
			}
			continue
		}
		bb.add(dk, sv, fi.Value())
		if bb.n == p.batchRows {
			if !send(batchOrErr{rec: bb.build()}) {
				return
			}
		}
		if bb.n == 0 && ctx.Err() != nil {
			return
		}
	}
	if err := fi.Err(); err != nil {
		send(batchOrErr{err: err})
		return
	}
	if bb.n > 0 {
		send(batchOrErr{rec: bb.build()})
	}
}

type batchBuilder struct {
	p               *viewPlan
	n               int
	bucket          *array.Uint32Builder
	step, state     *array.Int32Builder
	key, sub, value *array.BinaryBuilder
	decoded         []array.Builder
}

func newBatchBuilder(p *viewPlan) *batchBuilder {
	bb := &batchBuilder{
		p:      p,
		bucket: array.NewUint32Builder(p.mem),
		step:   array.NewInt32Builder(p.mem), state: array.NewInt32Builder(p.mem),
		key:   array.NewBinaryBuilder(p.mem, arrow.BinaryTypes.Binary),
		sub:   array.NewBinaryBuilder(p.mem, arrow.BinaryTypes.Binary),
		value: array.NewBinaryBuilder(p.mem, arrow.BinaryTypes.Binary),
	}
	for _, d := range p.decoded {
		if d.Codec == "int64" {
			bb.decoded = append(bb.decoded, array.NewInt64Builder(p.mem))
		} else {
			bb.decoded = append(bb.decoded, array.NewStringBuilder(p.mem))
		}
	}
	return bb
}

func (bb *batchBuilder) add(dk snapshotfmt.DecodedKey, sv *stateView, val []byte) {
	bb.bucket.Append(dk.Bucket)
	bb.step.Append(sv.stepIdx)
	bb.state.Append(sv.stateIdx)
	bb.key.Append(dk.Key)
	st := sv.kind
	var sub []byte
	if st == snapshotfmt.KindMap {
		sub = dk.SubKey
		bb.sub.Append(sub)
	} else {
		bb.sub.AppendNull()
	}
	bb.value.Append(val)
	for j, d := range bb.p.decoded {
		var src []byte
		ok := sv.decode[j]
		switch d.Field {
		case ColKey:
			src = dk.Key
		case ColSubKey:
			src = sub
			ok = ok && st == snapshotfmt.KindMap
		default:
			src = val
		}
		appendDecoded(bb.decoded[j], d.Codec, src, ok)
	}
	bb.n++
}

// DecodeInt64 decodes the int64 codec: exactly 8 bytes, big-endian.
func DecodeInt64(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

// DecodeText decodes the utf8 and json codecs to a string; ok is false when
// the bytes are not valid for the codec.
func DecodeText(codec string, b []byte) (string, bool) {
	switch codec {
	case "utf8":
		return string(b), utf8.Valid(b)
	case "json":
		return string(b), json.Valid(b)
	}
	return "", false
}

func appendDecoded(b array.Builder, codec string, src []byte, ok bool) {
	if codec == "int64" {
		ib := b.(*array.Int64Builder)
		if v, good := DecodeInt64(src); ok && good {
			ib.Append(v)
		} else {
			ib.AppendNull()
		}
		return
	}
	sb := b.(*array.StringBuilder)
	if !ok {
		sb.AppendNull()
		return
	}
	// Validate in place and append the bytes: DecodeText's string would
	// be one allocation per row.
	if validText(codec, src) {
		sb.BinaryBuilder.Append(src)
	} else {
		sb.AppendNull()
	}
}

// validText reports whether b is valid for the utf8 or json codec.
func validText(codec string, b []byte) bool {
	switch codec {
	case "utf8":
		return utf8.Valid(b)
	case "json":
		return json.Valid(b)
	}
	return false
}

func (bb *batchBuilder) build() arrow.Record {
	cols := make([]arrow.Array, 0, 6+len(bb.decoded))
	stepIdx := bb.step.NewArray()
	stateIdx := bb.state.NewArray()
	cols = append(cols,
		bb.bucket.NewArray(),
		array.NewDictionaryArray(DictType, stepIdx, bb.p.stepD),
		array.NewDictionaryArray(DictType, stateIdx, bb.p.stateD),
		bb.key.NewArray(), bb.sub.NewArray(), bb.value.NewArray())
	stepIdx.Release()
	stateIdx.Release()
	for _, d := range bb.decoded {
		cols = append(cols, d.NewArray())
	}
	rec := array.NewRecord(bb.p.schema, cols, int64(bb.n))
	for _, c := range cols {
		c.Release()
	}
	bb.n = 0
	return rec
}

func (bb *batchBuilder) release() {
	for _, b := range []array.Builder{bb.bucket, bb.step, bb.state, bb.key, bb.sub, bb.value} {
		b.Release()
	}
	for _, d := range bb.decoded {
		d.Release()
	}
}
