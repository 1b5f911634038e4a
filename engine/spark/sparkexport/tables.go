package sparkexport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/decimal128"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/rebucket/rebucket/engine/spark"
	"github.com/rebucket/rebucket/internal/unsaferow"
)

// ---- Arrow IPC ----

type arrowTable struct {
	w        *ipc.FileWriter
	b        *array.RecordBuilder
	op       *spark.Operator
	s        *spark.Store
	n, batch int
}

func newArrowTable(out io.WriteSeeker, op *spark.Operator, s *spark.Store, meta map[string]string, o Options) (*arrowTable, error) {
	schema, err := ArrowSchema(s, meta)
	if err != nil {
		return nil, err
	}
	mem := memory.NewGoAllocator()
	opts := []ipc.Option{ipc.WithSchema(schema), ipc.WithAllocator(mem)}
	if o.Compression == "zstd" {
		opts = append(opts, ipc.WithZstd())
	}
	w, err := ipc.NewFileWriter(out, opts...)
	if err != nil {
		return nil, err
	}
	return &arrowTable{w: w, b: array.NewRecordBuilder(mem, schema), op: op, s: s, batch: o.BatchRows}, nil
}

func (a *arrowTable) add(p int32, key, value []any, rawKey, rawValue []byte) error {
	f := a.b.Fields()
	f[0].(*array.Int32Builder).Append(int32(a.op.ID))
	f[1].(*array.StringBuilder).Append(a.op.Name)
	f[2].(*array.StringBuilder).Append(a.s.Name)
	f[3].(*array.Int32Builder).Append(p)
	appendRowArrow(f[4], a.s.KeySchema, key, rawKey)
	appendRowArrow(f[5], a.s.ValueSchema, value, rawValue)
	if a.n++; a.n >= a.batch {
		return a.flush()
	}
	return nil
}

func appendRowArrow(b array.Builder, t *unsaferow.Type, vals []any, raw []byte) {
	if t == nil {
		b.(*array.BinaryBuilder).Append(raw)
		return
	}
	appendArrow(b, t, vals)
}

// appendArrow appends one decoded value (unsaferow.Decode's Go types) of
// Catalyst type t to the builder of ArrowType(t).
func appendArrow(b array.Builder, t *unsaferow.Type, v any) {
	if v == nil && t.Kind != unsaferow.Struct {
		b.AppendNull()
		return
	}
	switch t.Kind {
	case unsaferow.Boolean:
		b.(*array.BooleanBuilder).Append(v.(bool))
	case unsaferow.Byte:
		b.(*array.Int8Builder).Append(v.(int8))
	case unsaferow.Short:
		b.(*array.Int16Builder).Append(v.(int16))
	case unsaferow.Int:
		b.(*array.Int32Builder).Append(v.(int32))
	case unsaferow.Long:
		b.(*array.Int64Builder).Append(v.(int64))
	case unsaferow.Float:
		b.(*array.Float32Builder).Append(v.(float32))
	case unsaferow.Double:
		b.(*array.Float64Builder).Append(v.(float64))
	case unsaferow.String:
		b.(*array.StringBuilder).Append(v.(string))
	case unsaferow.Binary:
		b.(*array.BinaryBuilder).Append(v.([]byte))
	case unsaferow.Date:
		b.(*array.Date32Builder).Append(arrow.Date32(v.(int32)))
	case unsaferow.Timestamp, unsaferow.TimestampNTZ:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(v.(int64)))
	case unsaferow.Decimal:
		b.(*array.Decimal128Builder).Append(decimal128.FromBigInt(v.(unsaferow.DecimalValue).Unscaled))
	case unsaferow.Null:
		b.AppendNull()
	case unsaferow.Struct:
		sb := b.(*array.StructBuilder)
		if v == nil {
			sb.AppendNull()
			return
		}
		sb.Append(true)
		vals := v.([]any)
		for i, f := range t.Fields {
			appendArrow(sb.FieldBuilder(i), f.Type, vals[i])
		}
	}
}

func (a *arrowTable) flush() error {
	if a.n == 0 {
		return nil
	}
	rec := a.b.NewRecord()
	defer rec.Release()
	a.n = 0
	return a.w.Write(rec)
}

func (a *arrowTable) close() error {
	err := a.flush()
	a.b.Release()
	return errors.Join(err, a.w.Close())
}

// ---- Parquet ----

type parquetTable struct {
	bw   *bufio.Writer
	w    *parquet.Writer
	op   *spark.Operator
	s    *spark.Store
	rows []parquet.Row
}

const parquetBatch = 4096

func newParquetTable(out io.Writer, op *spark.Operator, s *spark.Store, meta map[string]string, o Options) (*parquetTable, error) {
	schema, err := ParquetSchema(s)
	if err != nil {
		return nil, err
	}
	codec, err := codecOf(Parquet, o.Compression)
	if err != nil {
		return nil, err
	}
	opts := []parquet.WriterOption{schema, parquet.Compression(codec),
		parquet.MaxRowsPerRowGroup(int64(o.RowGroupRows)), parquet.CreatedBy("rebucket", "", "")}
	for k, v := range meta {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	return &parquetTable{bw: bw, w: parquet.NewWriter(bw, opts...), op: op, s: s}, nil
}

func (p *parquetTable) add(part int32, key, value []any, rawKey, rawValue []byte) error {
	var row parquet.Row
	if n := len(p.rows); n < cap(p.rows) {
		row = p.rows[:n+1][n][:0] // reuse the slice of a flushed row
	}
	row = append(row,
		parquet.Int32Value(int32(p.op.ID)).Level(0, 0, 0),
		parquet.ByteArrayValue([]byte(p.op.Name)).Level(0, 0, 1),
		parquet.ByteArrayValue([]byte(p.s.Name)).Level(0, 0, 2),
		parquet.Int32Value(part).Level(0, 0, 3))
	col := 4
	row = appendRowParquet(row, p.s.KeySchema, key, rawKey, &col)
	row = appendRowParquet(row, p.s.ValueSchema, value, rawValue, &col)
	p.rows = append(p.rows, row)
	if len(p.rows) >= parquetBatch {
		return p.flush()
	}
	return nil
}

// appendRowParquet appends the leaf values of a key or value column: the
// raw bytes (required) when the schema is unknown, an always-null leaf for
// a struct of no fields, else the struct's fields (each optional).
func appendRowParquet(row parquet.Row, t *unsaferow.Type, vals []any, raw []byte, col *int) parquet.Row {
	switch {
	case t == nil:
		row = append(row, parquet.ByteArrayValue(slices.Clone(raw)).Level(0, 0, *col))
		*col++
	case len(t.Fields) == 0:
		row = append(row, parquet.NullValue().Level(0, 0, *col))
		*col++
	default:
		for i, f := range t.Fields {
			row = appendParquet(row, f.Type, vals[i], 0, col)
		}
	}
	return row
}

// appendParquet appends the leaves of an optional field of type t whose
// enclosing groups define def levels: a null gives a null at def for every
// leaf under it; a value is defined at def+1.
func appendParquet(row parquet.Row, t *unsaferow.Type, v any, def int, col *int) parquet.Row {
	if v == nil || t.Kind == unsaferow.Null || t.Kind == unsaferow.Struct && len(t.Fields) == 0 {
		for range leaves(t) {
			row = append(row, parquet.NullValue().Level(0, def, *col))
			*col++
		}
		return row
	}
	def++
	if t.Kind == unsaferow.Struct {
		vals := v.([]any)
		for i, f := range t.Fields {
			row = appendParquet(row, f.Type, vals[i], def, col)
		}
		return row
	}
	row = append(row, leafValue(t, v).Level(0, def, *col))
	*col++
	return row
}

// leaves is the number of Parquet leaf columns of ParquetNode(t).
func leaves(t *unsaferow.Type) int {
	if t.Kind != unsaferow.Struct || len(t.Fields) == 0 {
		return 1
	}
	n := 0
	for _, f := range t.Fields {
		n += leaves(f.Type)
	}
	return n
}

func leafValue(t *unsaferow.Type, v any) parquet.Value {
	switch t.Kind {
	case unsaferow.Boolean:
		return parquet.BooleanValue(v.(bool))
	case unsaferow.Byte:
		return parquet.Int32Value(int32(v.(int8)))
	case unsaferow.Short:
		return parquet.Int32Value(int32(v.(int16)))
	case unsaferow.Int, unsaferow.Date:
		return parquet.Int32Value(v.(int32))
	case unsaferow.Long, unsaferow.Timestamp, unsaferow.TimestampNTZ:
		return parquet.Int64Value(v.(int64))
	case unsaferow.Float:
		return parquet.FloatValue(v.(float32))
	case unsaferow.Double:
		return parquet.DoubleValue(v.(float64))
	case unsaferow.String:
		return parquet.ByteArrayValue([]byte(v.(string)))
	case unsaferow.Binary:
		return parquet.ByteArrayValue(v.([]byte))
	case unsaferow.Decimal:
		u := v.(unsaferow.DecimalValue).Unscaled
		switch {
		case t.Precision <= 9:
			return parquet.Int32Value(int32(u.Int64()))
		case t.Precision <= unsaferow.MaxLongDigits:
			return parquet.Int64Value(u.Int64())
		}
		return parquet.FixedLenByteArrayValue(signExtend(u, decimalBytes(t.Precision)))
	}
	panic(fmt.Sprintf("sparkexport: no Parquet leaf for %s", t))
}

// signExtend is v in big-endian two's complement over n bytes (v fits:
// Decode checks a decimal's bytes against its precision's 16).
func signExtend(v *big.Int, n int) []byte {
	tw := unsaferow.ToTwos(v)
	out := make([]byte, n)
	if v.Sign() < 0 {
		for i := range out {
			out[i] = 0xff
		}
	}
	if len(tw) > n {
		tw = tw[len(tw)-n:]
	}
	copy(out[n-len(tw):], tw)
	return out
}

func (p *parquetTable) flush() error {
	if len(p.rows) == 0 {
		return nil
	}
	_, err := p.w.WriteRows(p.rows)
	p.rows = p.rows[:0]
	return err
}

func (p *parquetTable) close() error {
	err := p.flush()
	err = errors.Join(err, p.w.Close())
	return errors.Join(err, p.bw.Flush())
}
