package dataset

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"github.com/rebucket/rebucket/internal/fsx"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// sink writes rows of view batches into one output file.
type sink interface {
	// write appends rows [lo, hi) of rec.
	write(rec arrow.Record, lo, hi int64) error
	// close flushes, fsyncs and closes the file.
	close() error
	abort()
	rows() uint64
}

type sinkConfig struct {
	format       Format
	schema       *arrow.Schema // the view's schema
	drop         map[string]bool
	compression  string
	rowGroupRows int64
	meta         map[string]string
	states       []snapshotfmt.State // view dictionary order, for JSONL decoding
}

func newSink(path string, cfg sinkConfig) (sink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fsx.FilePerm)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	var s sink
	switch cfg.format {
	case Parquet:
		s, err = newParquetSink(f, cfg)
	case Arrow:
		s, err = newArrowSink(f, cfg)
	default:
		s, err = newJSONLSink(f, cfg)
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return s, nil
}

func syncClose(f *os.File) error {
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", f.Name(), err)
	}
	return nil
}

// kept returns the indices of the view columns a sink writes.
func kept(schema *arrow.Schema, drop map[string]bool) []int {
	var out []int
	for i, f := range schema.Fields() {
		if !drop[f.Name] {
			out = append(out, i)
		}
	}
	return out
}

// ---- Parquet ----

type parquetSink struct {
	f  *os.File
	bw *bufio.Writer
	w  *parquet.Writer
	// rg is the row group being filled column by column; each column is
	// encoded and compressed on its own goroutine (the columns are
	// independent until the row group is committed, serially).
	rg      *parquet.ConcurrentRowGroupWriter
	rgRows  int64
	maxRows int64
	cols    []int             // view column index per kept column
	leaf    []int             // parquet leaf index per kept column
	opt     []bool            // optional (nullable) per kept column
	vals    [][]parquet.Value // per kept column, reused between calls
	n       uint64
}

func parquetCodec(name string) (compress.Codec, error) {
	switch name {
	case "", "zstd":
		return &zstd.Codec{Level: zstd.SpeedFastest}, nil
	case "snappy":
		return &snappy.Codec{}, nil
	case "none":
		return &uncompressed.Codec{}, nil
	}
	return nil, fmt.Errorf("%w: compression %q: want zstd, snappy or none", snapshotfmt.ErrInvalidArgument, name)
}

// parquetNode maps an Arrow column to its Parquet type.
func parquetNode(f arrow.Field) parquet.Node {
	var n parquet.Node
	switch f.Type.ID() {
	case arrow.UINT32:
		n = parquet.Uint(32)
	case arrow.INT32:
		n = parquet.Int(32)
	case arrow.INT64:
		n = parquet.Int(64)
	case arrow.DICTIONARY:
		n = parquet.Encoded(parquet.String(), &parquet.RLEDictionary)
	case arrow.STRING:
		n = parquet.String()
	default:
		n = parquet.Leaf(parquet.ByteArrayType)
	}
	if f.Nullable {
		n = parquet.Optional(n)
	}
	return n
}

func newParquetSink(f *os.File, cfg sinkConfig) (*parquetSink, error) {
	codec, err := parquetCodec(cfg.compression)
	if err != nil {
		return nil, err
	}
	cols := kept(cfg.schema, cfg.drop)
	g := parquet.Group{}
	for _, i := range cols {
		fl := cfg.schema.Field(i)
		g[fl.Name] = parquetNode(fl)
	}
	schema := parquet.NewSchema("rebucket", g)
	opts := []parquet.WriterOption{
		schema, parquet.Compression(codec),
		parquet.MaxRowsPerRowGroup(cfg.rowGroupRows),
		parquet.PageBufferSize(1 << 20),
		parquet.CreatedBy("rebucket", "", ""),
	}
	for k, v := range cfg.meta {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	// Min/max bounds of byte columns cost a comparison per row and help no
	// reader: rows are in bucket (hash) order, so every page of keys spans
	// nearly the whole key range, and values are blobs. The bucket,
	// step/state and integer columns keep theirs.
	for _, i := range cols {
		fl := cfg.schema.Field(i)
		if fl.Type.ID() == arrow.BINARY || fl.Type.ID() == arrow.STRING {
			opts = append(opts, parquet.SkipPageBounds(fl.Name))
		}
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	ps := &parquetSink{f: f, bw: bw, w: parquet.NewWriter(bw, opts...), cols: cols, maxRows: cfg.rowGroupRows}
	ps.rg = ps.w.BeginRowGroup()
	for _, i := range cols {
		name := cfg.schema.Field(i).Name
		lc, ok := schema.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("parquet schema lost column %s", name)
		}
		ps.leaf = append(ps.leaf, lc.ColumnIndex)
		ps.opt = append(ps.opt, lc.MaxDefinitionLevel > 0)
	}
	ps.vals = make([][]parquet.Value, len(cols))
	return ps, nil
}

func (ps *parquetSink) write(rec arrow.Record, lo, hi int64) error {
	for lo < hi {
		end := min(hi, lo+ps.maxRows-ps.rgRows)
		if err := ps.writeColumns(rec, lo, end); err != nil {
			return fmt.Errorf("write %s: %w", ps.f.Name(), err)
		}
		ps.rgRows += end - lo
		ps.n += uint64(end - lo)
		lo = end
		if ps.rgRows == ps.maxRows {
			if err := ps.commit(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (ps *parquetSink) commit() error {
	if ps.rgRows == 0 {
		return nil
	}
	if _, err := ps.rg.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", ps.f.Name(), err)
	}
	ps.rgRows = 0
	return nil
}

// writeColumns writes rows [lo, hi) of rec, one goroutine per column (the
// runtime spreads them over GOMAXPROCS; the value column dominates).
func (ps *parquetSink) writeColumns(rec arrow.Record, lo, hi int64) error {
	errs := make([]error, len(ps.cols))
	var wg sync.WaitGroup
	for j := range ps.cols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[j] = ps.writeColumn(j, rec.Column(ps.cols[j]), int(lo), int(hi))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeColumn appends rows [lo, hi) of one view column to its column
// writer, in pages' worth of values with a reused buffer: no per-row
// allocation.
func (ps *parquetSink) writeColumn(j int, col arrow.Array, lo, hi int) (err error) {
	defer func() {
		// A panic on a goroutine would kill the process; make it an error.
		if r := recover(); r != nil {
			err = fmt.Errorf("parquet column %d: %v", j, r)
		}
	}()
	cw := ps.rg.ColumnWriters()[ps.leaf[j]]
	leaf := ps.leaf[j]
	def := 0
	if ps.opt[j] {
		def = 1
	}
	var dict [][]byte
	if d, ok := col.(*array.Dictionary); ok {
		ds := d.Dictionary().(*array.String)
		dict = make([][]byte, ds.Len())
		for i := range dict {
			dict[i] = []byte(ds.Value(i))
		}
	}
	const chunk = 4096
	vals := ps.vals[j]
	for start := lo; start < hi; start += chunk {
		end := min(hi, start+chunk)
		vals = vals[:0]
		for r := start; r < end; r++ {
			var v parquet.Value
			if col.IsNull(r) {
				vals = append(vals, parquet.NullValue().Level(0, 0, leaf))
				continue
			}
			switch a := col.(type) {
			case *array.Binary:
				v = parquet.ByteArrayValue(a.Value(r))
			case *array.String:
				// The column writer copies the bytes; no need to copy here.
				s := a.Value(r)
				v = parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(s), len(s)))
			case *array.Dictionary:
				v = parquet.ByteArrayValue(dict[a.GetValueIndex(r)])
			case *array.Uint32:
				v = parquet.Int32Value(int32(a.Value(r)))
			case *array.Int64:
				v = parquet.Int64Value(a.Value(r))
			case *array.Int32:
				v = parquet.Int32Value(a.Value(r))
			default:
				return fmt.Errorf("unexpected view column type %T", col)
			}
			vals = append(vals, v.Level(0, def, leaf))
		}
		if _, err := cw.WriteRowValues(vals); err != nil {
			return err
		}
	}
	// Drop references into the batch before it is released.
	clear(vals)
	ps.vals[j] = vals[:0]
	return nil
}

func (ps *parquetSink) close() error {
	if err := ps.commit(); err != nil {
		ps.f.Close()
		return err
	}
	if err := ps.w.Close(); err != nil {
		ps.f.Close()
		return fmt.Errorf("finish %s: %w", ps.f.Name(), err)
	}
	if err := ps.bw.Flush(); err != nil {
		ps.f.Close()
		return fmt.Errorf("write %s: %w", ps.f.Name(), err)
	}
	return syncClose(ps.f)
}

func (ps *parquetSink) abort()       { ps.f.Close() }
func (ps *parquetSink) rows() uint64 { return ps.n }

// ---- Arrow IPC ----

type arrowSink struct {
	f      *os.File
	w      *ipc.FileWriter
	cols   []int
	schema *arrow.Schema
	n      uint64
}

func newArrowSink(f *os.File, cfg sinkConfig) (*arrowSink, error) {
	cols := kept(cfg.schema, cfg.drop)
	var fields []arrow.Field
	for _, i := range cols {
		fields = append(fields, cfg.schema.Field(i))
	}
	md := arrow.MetadataFrom(cfg.meta)
	schema := arrow.NewSchema(fields, &md)
	opts := []ipc.Option{ipc.WithSchema(schema)}
	// Uncompressed unless asked: JavaScript's apache-arrow (npm) has no
	// zstd codec and cannot read a compressed file at all.
	switch cfg.compression {
	case "zstd":
		opts = append(opts, ipc.WithZstd())
	case "", "none":
	default:
		return nil, fmt.Errorf("%w: compression %q: Arrow IPC files take zstd or none", snapshotfmt.ErrInvalidArgument, cfg.compression)
	}
	w, err := ipc.NewFileWriter(f, opts...)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", f.Name(), err)
	}
	return &arrowSink{f: f, w: w, cols: cols, schema: schema}, nil
}

func (as *arrowSink) write(rec arrow.Record, lo, hi int64) error {
	cols := make([]arrow.Array, len(as.cols))
	for j, ci := range as.cols {
		cols[j] = array.NewSlice(rec.Column(ci), lo, hi)
	}
	r := array.NewRecord(as.schema, cols, hi-lo)
	for _, c := range cols {
		c.Release()
	}
	defer r.Release()
	if err := as.w.Write(r); err != nil {
		return fmt.Errorf("write %s: %w", as.f.Name(), err)
	}
	as.n += uint64(hi - lo)
	return nil
}

func (as *arrowSink) close() error {
	if err := as.w.Close(); err != nil {
		as.f.Close()
		return fmt.Errorf("finish %s: %w", as.f.Name(), err)
	}
	return syncClose(as.f)
}

func (as *arrowSink) abort()       { as.f.Close() }
func (as *arrowSink) rows() uint64 { return as.n }

// ---- JSON Lines ----

// jsonlSink writes one object per row: bucket, step, state, then key,
// sub_key and value as decoded text or number where the state's codec hint
// decodes them, else as key_base64, sub_key_base64, value_base64.
type jsonlSink struct {
	f      *os.File
	bw     *bufio.Writer
	schema *arrow.Schema
	drop   map[string]bool
	byName map[string]snapshotfmt.State
	line   []byte
	n      uint64
}

func newJSONLSink(f *os.File, cfg sinkConfig) (*jsonlSink, error) {
	by := map[string]snapshotfmt.State{}
	for _, s := range cfg.states {
		by[s.Step+"\x00"+s.Name] = s
	}
	return &jsonlSink{f: f, bw: bufio.NewWriterSize(f, 1<<20), schema: cfg.schema, drop: cfg.drop, byName: by}, nil
}

func dictString(col arrow.Array, r int) string {
	d := col.(*array.Dictionary)
	return d.Dictionary().(*array.String).Value(d.GetValueIndex(r))
}

func (js *jsonlSink) write(rec arrow.Record, lo, hi int64) error {
	bucket := rec.Column(0).(*array.Uint32)
	key := rec.Column(3).(*array.Binary)
	sub := rec.Column(4).(*array.Binary)
	val := rec.Column(5).(*array.Binary)
	for r := int(lo); r < int(hi); r++ {
		step, name := dictString(rec.Column(1), r), dictString(rec.Column(2), r)
		st := js.byName[step+"\x00"+name]
		l := append(js.line[:0], '{')
		if !js.drop[reader.ColBucket] {
			l = append(l, `"bucket":`...)
			l = strconv.AppendUint(l, uint64(bucket.Value(r)), 10)
			l = append(l, ',')
		}
		l = append(l, `"step":`...)
		l = appendJSONString(l, step)
		l = append(l, `,"state":`...)
		l = appendJSONString(l, name)
		// Every row has the same keys, null where absent, so readers that
		// infer a schema from a sample (DuckDB's read_json) keep them all.
		l = appendField(l, reader.ColKey, st.KeyCodec, key.Value(r))
		if !sub.IsNull(r) {
			l = appendField(l, reader.ColSubKey, st.SubKeyCodec, sub.Value(r))
		} else {
			l = append(l, `,"`+reader.ColSubKey+`":null,"`+reader.ColSubKey+`_base64":null`...)
		}
		l = appendField(l, reader.ColValue, st.ValueCodec, val.Value(r))
		l = append(l, '}', '\n')
		js.line = l
		if _, err := js.bw.Write(l); err != nil {
			return fmt.Errorf("write %s: %w", js.f.Name(), err)
		}
	}
	js.n += uint64(hi - lo)
	return nil
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

// appendField writes ,"name":decoded,"name_base64":null or, for bytes the
// codec hint does not decode, ,"name":null,"name_base64":"...".
func appendField(dst []byte, name, codec string, b []byte) []byte {
	n := len(dst)
	dst = appendDecoded(dst, name, codec, b)
	if len(dst) > n && !bytes.HasPrefix(dst[n:], []byte(`,"`+name+`_base64"`)) {
		return append(dst, `,"`+name+`_base64":null`...)
	}
	return dst
}

func appendDecoded(dst []byte, name, codec string, b []byte) []byte {
	switch codec {
	case "int64":
		if v, ok := reader.DecodeInt64(b); ok {
			dst = append(dst, `,"`+name+`":`...)
			return strconv.AppendInt(dst, v, 10)
		}
	case "utf8":
		if s, ok := reader.DecodeText(codec, b); ok {
			dst = append(dst, `,"`+name+`":`...)
			return appendJSONString(dst, s)
		}
	case "json":
		if _, ok := reader.DecodeText(codec, b); ok {
			dst = append(dst, `,"`+name+`":`...)
			// Compact so one entry stays one line.
			var c []byte
			if cb, err := compactJSON(b); err == nil {
				c = cb
			} else {
				c = b
			}
			return append(dst, c...)
		}
	}
	dst = append(dst, `,"`+name+`_base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	dst = append(dst, '"')
	return append(dst, `,"`+name+`":null`...)
}

func compactJSON(b []byte) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func (js *jsonlSink) close() error {
	if err := js.bw.Flush(); err != nil {
		js.f.Close()
		return fmt.Errorf("write %s: %w", js.f.Name(), err)
	}
	return syncClose(js.f)
}

func (js *jsonlSink) abort()       { js.f.Close() }
func (js *jsonlSink) rows() uint64 { return js.n }
