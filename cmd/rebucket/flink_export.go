package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/engine/flink"
	"github.com/rebucket/rebucket/engine/flink/keytype"
	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// flinkExportSchema is the table of a savepoint's keyed entries: one row per
// entry, raw bytes always, and typed columns where Flink's built-in
// serializers decode the key and value (null elsewhere).
var flinkExportSchema = arrow.NewSchema([]arrow.Field{
	{Name: "operator", Type: arrow.BinaryTypes.String},
	{Name: "operator_id", Type: arrow.BinaryTypes.String},
	{Name: "state", Type: arrow.BinaryTypes.String},
	{Name: "kind", Type: arrow.BinaryTypes.String},
	{Name: "key_group", Type: arrow.PrimitiveTypes.Int32},
	{Name: "key", Type: arrow.BinaryTypes.Binary},
	{Name: "key_string", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "key_int64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "key_double", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "key_bool", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "key_json", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "namespace_user_key", Type: arrow.BinaryTypes.Binary},
	{Name: "user_key_json", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "timer_timestamp", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "value", Type: arrow.BinaryTypes.Binary},
	{Name: "value_json", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

const flinkExportBatch = 64 << 10

// flinkRow is one exported entry: JSON Lines use its json names, Parquet
// its parquet columns (those of flinkExportSchema, in order; pointers are
// optional columns).
type flinkRow struct {
	Operator    string   `json:"operator" parquet:"operator"`
	OperatorID  string   `json:"operator_id" parquet:"operator_id"`
	State       string   `json:"state" parquet:"state"`
	Kind        string   `json:"kind" parquet:"kind"`
	KeyGroup    int32    `json:"key_group" parquet:"key_group"`
	Key         []byte   `json:"key_base64" parquet:"key"`
	KeyString   *string  `json:"key_string" parquet:"key_string,optional"`
	KeyInt64    *int64   `json:"key_int64" parquet:"key_int64,optional"`
	KeyDouble   *float64 `json:"key_double" parquet:"key_double,optional"`
	KeyBool     *bool    `json:"key_bool" parquet:"key_bool,optional"`
	KeyJSON     *string  `json:"key_json" parquet:"key_json,optional"`
	Rest        []byte   `json:"namespace_user_key_base64" parquet:"namespace_user_key"`
	UserKeyJSON *string  `json:"user_key_json" parquet:"user_key_json,optional"`
	Timer       *int64   `json:"timer_timestamp" parquet:"timer_timestamp,optional"`
	Value       []byte   `json:"value_base64" parquet:"value"`
	ValueJSON   *string  `json:"value_json" parquet:"value_json,optional"`
}

// flinkRowSink receives rows and writes them in a format.
type flinkRowSink interface {
	add(r *flinkRow) error
	close() error
}

func runFlinkExport(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Flink", "bucket-range", "worker", "partition-by", "state", "batch-rows"); err != nil {
		return err
	}
	format, _ := cmd.Flags().GetString("format")
	out, _ := cmd.Flags().GetString("out")
	force, _ := cmd.Flags().GetBool("force")
	comp, _ := cmd.Flags().GetString("compression")
	rowGroup, _ := cmd.Flags().GetInt("row-group-size")
	if !cmd.Flags().Changed("format") {
		switch strings.ToLower(filepath.Ext(out)) {
		case ".arrow", ".feather":
			format = "arrow"
		case ".jsonl", ".json":
			format = "jsonl"
		default:
			format = "parquet" // --format has no default: export infers it
		}
	}
	if format != "parquet" && format != "arrow" && format != "jsonl" {
		return usagef(fmt.Errorf("--format %q: want parquet, arrow or jsonl", format))
	}
	if rowGroup < 1 {
		return usagef(fmt.Errorf("--row-group-size %d: want at least 1", rowGroup))
	}
	sp, err := flink.Open(args[0])
	if err != nil {
		return err
	}
	if err := flinkOutputAllowed(sp.Dir, out, force); err != nil {
		return err
	}
	// The file is written in a run directory beside its final name, locked
	// for this run's life, as the native export does: a run killed before
	// it published leaves one that the next export to the same name
	// removes, and no run removes a live one's.
	prefix := "." + filepath.Base(out) + ".rebucket-tmp-"
	fsx.RemoveStale(nil, filepath.Dir(out), prefix)
	runDir, err := fsx.MkdirRun(nil, filepath.Dir(out), prefix, fsx.DirPerm)
	if err != nil {
		return fmt.Errorf("create a temporary directory beside %s: %w", out, err)
	}
	defer runDir.Remove()
	tmp, err := os.OpenFile(filepath.Join(runDir.Path, filepath.Base(out)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create the output beside %s: %w", out, err)
	}
	defer tmp.Close()
	var sink flinkRowSink
	switch format {
	case "jsonl":
		sink = &jsonlRows{w: bufio.NewWriterSize(tmp, 1<<20)}
	case "parquet":
		sink, err = newParquetRows(tmp, comp, rowGroup)
		if err != nil {
			return err
		}
	default:
		sink, err = newArrowRows(tmp, comp)
		if err != nil {
			return err
		}
	}
	dec := newFlinkDecoder()
	var rows uint64
	var row flinkRow
	err = sp.ForEachEntry(cmd.Context(), func(e *flink.KeyedEntry) error {
		dec.fill(&row, e)
		rows++
		return sink.add(&row)
	})
	if err != nil {
		_ = sink.close()
		return err
	}
	if err := sink.close(); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o640); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return fmt.Errorf("publish %s: %w", out, err)
	}
	_ = fsx.SyncDir(fsx.Or(nil), filepath.Dir(out))
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), map[string]any{"engine": engineFlink, "savepoint": args[0], "out": out, "format": format, "rows": rows})
	}
	fmt.Fprintf(cmd.OutOrStdout(), "exported %s rows of Flink savepoint %s to %s (%s)\n", units.Count(rows), args[0], out, format)
	return nil
}

// flinkOutputAllowed refuses an output that exists (unless --force and it is
// a regular file), or that lies inside the savepoint.
func flinkOutputAllowed(savepointDir, out string, force bool) error {
	if err := refuseOverlap([]string{out}, nil, savepointDir); err != nil {
		return err
	}
	fi, err := os.Lstat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !force:
		return fmt.Errorf("%w: %s exists; choose another --out, or --force to replace it", snapshotfmt.ErrRefused, out)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a regular file; --force replaces only a file an export could have written", snapshotfmt.ErrRefused, out)
	}
	return nil
}

// flinkDecoder decodes keys, user keys and values with Flink's built-in
// serializers, caching a codec per state.
type flinkDecoder struct {
	states map[*flink.StateMeta]*stateCodecs
}

type stateCodecs struct {
	value, elem, userKey, mapValue keytype.Codec
	namespaceLen                   int // fixed namespace length, -1 unknown
}

func newFlinkDecoder() *flinkDecoder {
	return &flinkDecoder{states: map[*flink.StateMeta]*stateCodecs{}}
}

func snapshotOf(s *flink.StateMeta, key string) *flink.Snapshot {
	for _, n := range s.Serializers {
		if n.Key == key {
			return n.Snapshot
		}
	}
	return nil
}

func codecOf(s *flink.Snapshot) keytype.Codec {
	if s == nil {
		return nil
	}
	c, err := keytype.ForSpec(s.Spec())
	if err != nil {
		return nil
	}
	return c
}

func (d *flinkDecoder) codecs(s *flink.StateMeta) *stateCodecs {
	if c, ok := d.states[s]; ok {
		return c
	}
	c := &stateCodecs{namespaceLen: -1}
	if ns := snapshotOf(s, "NAMESPACE_SERIALIZER"); ns != nil && strings.Contains(ns.Class, "VoidNamespaceSerializer") {
		c.namespaceLen = 1
	}
	v := snapshotOf(s, "VALUE_SERIALIZER")
	switch s.Kind() {
	case "LIST":
		if v != nil && len(v.Nested) == 1 {
			c.elem = codecOf(v.Nested[0])
		}
	case "MAP":
		if v != nil && len(v.Nested) == 2 {
			c.userKey, c.mapValue = codecOf(v.Nested[0]), codecOf(v.Nested[1])
		}
	default:
		c.value = codecOf(v)
	}
	d.states[s] = c
	return c
}

func (d *flinkDecoder) fill(r *flinkRow, e *flink.KeyedEntry) {
	*r = flinkRow{
		Operator: flinkOpLabel(e.Operator), OperatorID: e.Operator.IDString(), State: flink.JavaString(e.State.Name),
		Kind: e.State.Kind(), KeyGroup: int32(e.KeyGroup), Key: e.Key, Rest: e.Rest, Value: e.Value,
	}
	if e.Key == nil {
		r.Key = []byte{}
	}
	if e.Value == nil {
		r.Value = []byte{}
	}
	if e.State.IsTimers() {
		ts := e.Timestamp
		r.Timer = &ts
	}
	if e.KeyCodec != nil && e.Key != nil {
		if v, err := e.KeyCodec.Decode(e.Key); err == nil {
			setTyped(v, &r.KeyString, &r.KeyInt64, &r.KeyDouble, &r.KeyBool, &r.KeyJSON)
		}
	}
	if e.State.IsTimers() {
		return
	}
	c := d.codecs(e.State)
	switch {
	case c.value != nil:
		r.ValueJSON = decodeJSON(c.value, e.Value)
	case c.elem != nil:
		r.ValueJSON = decodeList(c.elem, e.Value)
	case c.userKey != nil && c.mapValue != nil && c.namespaceLen >= 0 && len(e.Rest) >= c.namespaceLen:
		uk := e.Rest[c.namespaceLen:]
		if n, err := c.userKey.Len(uk); err == nil {
			r.UserKeyJSON = decodeJSON(c.userKey, uk[:n])
		}
		if len(e.Value) >= 1 {
			if e.Value[0] != 0 {
				null := "null"
				r.ValueJSON = &null
			} else {
				r.ValueJSON = decodeJSON(c.mapValue, e.Value[1:])
			}
		}
	}
}

// setTyped puts a decoded key into the column of its type.
func setTyped(v any, s **string, i **int64, f **float64, b **bool, j **string) {
	switch x := v.(type) {
	case string:
		*s = &x
	case int64:
		*i = &x
	case int32:
		n := int64(x)
		*i = &n
	case int16:
		n := int64(x)
		*i = &n
	case int8:
		n := int64(x)
		*i = &n
	case uint16:
		str := string(rune(x))
		*s = &str
	case float64:
		*f = &x
	case float32:
		n := float64(x)
		*f = &n
	case bool:
		*b = &x
	default:
		if t := jsonText(v); t != nil {
			*j = t
		}
	}
}

func decodeJSON(c keytype.Codec, b []byte) *string {
	n, err := c.Len(b)
	if err != nil || n != len(b) {
		return nil
	}
	v, err := c.Decode(b)
	if err != nil {
		return nil
	}
	return jsonText(v)
}

// decodeList decodes a list state's value: elements joined by the byte ','
// (Flink's ListDelimitedSerializer).
func decodeList(c keytype.Codec, b []byte) *string {
	var items []any
	for len(b) > 0 {
		n, err := c.Len(b)
		if err != nil {
			return nil
		}
		v, err := c.Decode(b[:n])
		if err != nil {
			return nil
		}
		items = append(items, jsonable(v))
		b = b[n:]
		if len(b) > 0 {
			if b[0] != ',' {
				return nil
			}
			b = b[1:]
		}
	}
	if items == nil {
		items = []any{}
	}
	return jsonText(items)
}

// jsonable makes a decoded value JSON-encodable: NaN and infinities as
// strings, chars as strings, bytes as base64 (encoding/json's rule).
func jsonable(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
	case float32:
		return jsonable(float64(x))
	case uint16:
		return string(rune(x))
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = jsonable(x[i])
		}
		return out
	}
	return v
}

func jsonText(v any) *string {
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		return nil
	}
	s := string(b)
	return &s
}

// jsonlRows writes rows as JSON Lines, every row with the same keys.
type jsonlRows struct{ w *bufio.Writer }

func (j *jsonlRows) add(r *flinkRow) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	j.w.Write(b)
	return j.w.WriteByte('\n')
}

func (j *jsonlRows) close() error { return j.w.Flush() }

// arrowRows builds record batches of flinkExportSchema and hands them to a
// Parquet or Arrow IPC file writer.
type arrowRows struct {
	b     *array.RecordBuilder
	n     int
	write func(arrow.Record) error
	fin   func() error
}

func newArrowRows(w io.WriteSeeker, comp string) (*arrowRows, error) {
	mem := memory.NewGoAllocator()
	a := &arrowRows{b: array.NewRecordBuilder(mem, flinkExportSchema)}
	// Uncompressed by default: readers without a zstd codec (JavaScript's
	// apache-arrow) read it.
	opts := []ipc.Option{ipc.WithSchema(flinkExportSchema), ipc.WithAllocator(mem)}
	switch comp {
	case "none", "":
	case "zstd":
		opts = append(opts, ipc.WithZstd())
	default:
		return nil, usagef(fmt.Errorf("--compression %q: Arrow takes zstd or none", comp))
	}
	fw, err := ipc.NewFileWriter(w, opts...)
	if err != nil {
		return nil, err
	}
	a.write = fw.Write
	a.fin = fw.Close
	return a, nil
}

type parquetRows struct {
	w   *parquet.GenericWriter[flinkRow]
	buf []flinkRow
}

func newParquetRows(w io.Writer, comp string, rowGroup int) (*parquetRows, error) {
	var codec compress.Codec
	switch comp {
	case "zstd", "":
		codec = &zstd.Codec{Level: zstd.SpeedFastest}
	case "snappy":
		codec = &snappy.Codec{}
	case "none":
		codec = &uncompressed.Codec{}
	default:
		return nil, usagef(fmt.Errorf("--compression %q: want zstd, snappy or none", comp))
	}
	return &parquetRows{w: parquet.NewGenericWriter[flinkRow](w, parquet.Compression(codec), parquet.MaxRowsPerRowGroup(int64(rowGroup)))}, nil
}

func (p *parquetRows) add(r *flinkRow) error {
	// Rows hold slices valid only until the next entry: copy them.
	c := *r
	c.Key, c.Rest, c.Value = slices.Clone(r.Key), slices.Clone(r.Rest), slices.Clone(r.Value)
	p.buf = append(p.buf, c)
	if len(p.buf) >= flinkExportBatch {
		return p.flush()
	}
	return nil
}

func (p *parquetRows) flush() error {
	_, err := p.w.Write(p.buf)
	p.buf = p.buf[:0]
	return err
}

func (p *parquetRows) close() error { return errors.Join(p.flush(), p.w.Close()) }

func appendStr(b *array.StringBuilder, s *string) {
	if s == nil {
		b.AppendNull()
	} else {
		b.Append(*s)
	}
}

func (a *arrowRows) add(r *flinkRow) error {
	f := a.b.Fields()
	f[0].(*array.StringBuilder).Append(r.Operator)
	f[1].(*array.StringBuilder).Append(r.OperatorID)
	f[2].(*array.StringBuilder).Append(r.State)
	f[3].(*array.StringBuilder).Append(r.Kind)
	f[4].(*array.Int32Builder).Append(r.KeyGroup)
	f[5].(*array.BinaryBuilder).Append(r.Key)
	appendStr(f[6].(*array.StringBuilder), r.KeyString)
	if r.KeyInt64 != nil {
		f[7].(*array.Int64Builder).Append(*r.KeyInt64)
	} else {
		f[7].AppendNull()
	}
	if r.KeyDouble != nil {
		f[8].(*array.Float64Builder).Append(*r.KeyDouble)
	} else {
		f[8].AppendNull()
	}
	if r.KeyBool != nil {
		f[9].(*array.BooleanBuilder).Append(*r.KeyBool)
	} else {
		f[9].AppendNull()
	}
	appendStr(f[10].(*array.StringBuilder), r.KeyJSON)
	f[11].(*array.BinaryBuilder).Append(r.Rest)
	appendStr(f[12].(*array.StringBuilder), r.UserKeyJSON)
	if r.Timer != nil {
		f[13].(*array.Int64Builder).Append(*r.Timer)
	} else {
		f[13].AppendNull()
	}
	f[14].(*array.BinaryBuilder).Append(r.Value)
	appendStr(f[15].(*array.StringBuilder), r.ValueJSON)
	a.n++
	if a.n >= flinkExportBatch {
		return a.flush()
	}
	return nil
}

func (a *arrowRows) flush() error {
	if a.n == 0 {
		return nil
	}
	rec := a.b.NewRecord()
	defer rec.Release()
	a.n = 0
	return a.write(rec)
}

func (a *arrowRows) close() error {
	err := a.flush()
	a.b.Release()
	return errors.Join(err, a.fin())
}
