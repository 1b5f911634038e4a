package sparkexport

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/rebucket/rebucket/engine/spark"
	"github.com/rebucket/rebucket/internal/lz4java"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// realCheckpoints are checkpoints written by real Spark (4.3.0 and 3.5.9).
func realCheckpoints(t *testing.T) []string {
	var dirs []string
	for _, g := range []string{"../testdata/real/*", "../testdata/real35/*", "../testdata/interop/*/checkpoint", "../testdata/interop/spark35/*/checkpoint"} {
		m, _ := filepath.Glob(g)
		dirs = append(dirs, m...)
	}
	if len(dirs) < 10 {
		t.Fatalf("only %d test checkpoints found", len(dirs))
	}
	return dirs
}

// canon renders a value of unsaferow.Decode's Go types (or arrowValue's,
// which returns the same types) so that equal values compare equal:
// floats by their bits, decimals by their digits, bytes in hex.
func canon(v any) string { return canonAs(v, false) }

// canonAs is canon, with an empty struct rendered as null when emptyNull
// (as Parquet, which has no empty group, holds it).
func canonAs(v any, emptyNull bool) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case []any:
		if len(x) == 0 && emptyNull {
			return "null"
		}
		parts := make([]string, len(x))
		for i := range x {
			parts[i] = canonAs(x[i], emptyNull)
		}
		return "{" + strings.Join(parts, ",") + "}"
	case unsaferow.DecimalValue:
		return "dec:" + x.String()
	case float32:
		if x != x {
			return "f32:NaN" // the payload is no value (Spark writes one NaN)
		}
		return fmt.Sprintf("f32:%08x", math.Float32bits(x))
	case float64:
		if x != x {
			return "f64:NaN"
		}
		return fmt.Sprintf("f64:%016x", math.Float64bits(x))
	case []byte:
		return "bin:" + hex.EncodeToString(x)
	}
	return fmt.Sprintf("%T:%v", v, v)
}

// arrowValue reads row i of an Arrow column as the Go type unsaferow.Decode
// gives the Catalyst type t (nil t: the column holds raw bytes).
func arrowValue(t *testing.T, a arrow.Array, ct *unsaferow.Type, i int) any {
	t.Helper()
	if a.IsNull(i) {
		return nil
	}
	switch x := a.(type) {
	case *array.Boolean:
		return x.Value(i)
	case *array.Int8:
		return x.Value(i)
	case *array.Int16:
		return x.Value(i)
	case *array.Int32:
		return x.Value(i)
	case *array.Int64:
		return x.Value(i)
	case *array.Float32:
		return x.Value(i)
	case *array.Float64:
		return x.Value(i)
	case *array.String:
		return x.Value(i)
	case *array.Binary:
		return slices.Clone(x.Value(i))
	case *array.Date32:
		return int32(x.Value(i))
	case *array.Timestamp:
		return int64(x.Value(i))
	case *array.Decimal128:
		return unsaferow.DecimalValue{Unscaled: x.Value(i).BigInt(), Scale: int(x.DataType().(*arrow.Decimal128Type).Scale)}
	case *array.Null:
		return nil
	case *array.Struct:
		if len(ct.Fields) != x.NumField() {
			t.Fatalf("struct of %d fields for %s", x.NumField(), ct)
		}
		out := make([]any, x.NumField())
		for j := range out {
			out[j] = arrowValue(t, x.Field(j), ct.Fields[j].Type, i)
		}
		return out
	}
	t.Fatalf("unexpected Arrow column %T", a)
	return nil
}

// readArrowFile returns every row of an Arrow IPC file as
// "operator|name|store|partition|key|value" in canon form, and the schema.
func readArrowFile(t *testing.T, path string, s *spark.Store) ([]string, *arrow.Schema) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows []string
	for b := 0; b < r.NumRecords(); b++ {
		rec, err := r.Record(b)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			var k, v any
			if s.KeySchema == nil {
				k = arrowValue(t, rec.Column(4), nil, i)
			} else {
				k = arrowValue(t, rec.Column(4), s.KeySchema, i)
			}
			if s.ValueSchema == nil {
				v = arrowValue(t, rec.Column(5), nil, i)
			} else {
				v = arrowValue(t, rec.Column(5), s.ValueSchema, i)
			}
			rows = append(rows, fmt.Sprintf("%d|%s|%s|%d|%s|%s",
				rec.Column(0).(*array.Int32).Value(i), rec.Column(1).(*array.String).Value(i),
				rec.Column(2).(*array.String).Value(i), rec.Column(3).(*array.Int32).Value(i), canon(k), canon(v)))
		}
	}
	return rows, r.Schema()
}

// checkpointRows is every row of a store as the engine decodes it, in the
// form readArrowFile gives.
func checkpointRows(t *testing.T, c *spark.Checkpoint, op *spark.Operator, s *spark.Store, emptyNull bool) []string {
	t.Helper()
	var rows []string
	// through the checkpoint, whatever its state store provider
	err := c.ForEachRow(context.Background(), func(r spark.Row) error {
		if r.Operator != op || r.Store != s {
			return nil
		}
		k, v, p := r.Key, r.Value, r.Partition
		var kv, vv any = slices.Clone(k), slices.Clone(v)
		if s.KeySchema != nil {
			d, err := unsaferow.Decode(s.KeySchema, k)
			if err != nil {
				return err
			}
			kv = []any(d)
		}
		if s.ValueSchema != nil {
			d, err := unsaferow.Decode(s.ValueSchema, v)
			if err != nil {
				return err
			}
			vv = []any(d)
		}
		rows = append(rows, fmt.Sprintf("%d|%s|%s|%d|%s|%s", op.ID, op.Name, s.Name, p, canonAs(kv, emptyNull), canonAs(vv, emptyNull)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func sameRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	sort.Strings(got)
	sort.Strings(want)
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, the checkpoint has %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: row %q, the checkpoint has %q", what, got[i], want[i])
		}
	}
}

// exportAndCheck exports c in both formats and checks every table, row by
// row, against the checkpoint; Parquet through pyarrow when
// REBUCKET_PYTHON is set (it converts each table to Arrow IPC, read here
// as the Arrow export is), else its row count and column types through
// parquet-go. It returns the Arrow export's directory.
func exportAndCheck(t *testing.T, c *spark.Checkpoint) string {
	t.Helper()
	var arrowDir string
	for _, f := range []Format{Arrow, Parquet} {
		dir := t.TempDir()
		res, err := Export(context.Background(), c, dir, Options{Format: f, BatchRows: 7, RowGroupRows: 11})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		checkManifest(t, dir, res)
		var total uint64
		i := 0
		for _, op := range c.Operators {
			for _, s := range op.Stores {
				file := res.Files[i]
				i++
				if file.Name != FileName(op, s, f) || file.Store != s.Name || file.Operator != op.ID {
					t.Fatalf("file %d is %+v, want operator %d store %s", i, file, op.ID, s.Name)
				}
				want := checkpointRows(t, c, op, s, f == Parquet)
				if file.Rows != uint64(len(want)) {
					t.Fatalf("%s: %d rows reported, the checkpoint has %d", file.Name, file.Rows, len(want))
				}
				total += file.Rows
				wantSchema, err := ArrowSchema(s, nil)
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, file.Name)
				switch f {
				case Arrow:
					got, schema := readArrowFile(t, path, s)
					if !schema.Equal(wantSchema) {
						t.Fatalf("%s: schema\n%s\nwant\n%s", file.Name, schema, wantSchema)
					}
					if schema.Metadata().FindKey("rebucket.spark.key_schema") < 0 {
						t.Fatalf("%s: no key schema in the metadata", file.Name)
					}
					sameRows(t, file.Name, got, want)
				case Parquet:
					checkParquet(t, path, s, want, wantSchema)
				}
			}
		}
		if total != res.Rows || i != len(res.Files) {
			t.Fatalf("result counts %d rows in %d files, the tables %d in %d", res.Rows, len(res.Files), total, i)
		}
		if f == Arrow {
			arrowDir = dir
		}
	}
	return arrowDir
}

func checkManifest(t *testing.T, dir string, res *Result) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m Result
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Rows != res.Rows || len(m.Files) != len(res.Files) || m.Format != res.Format {
		t.Fatalf("manifest %+v, result %+v", m, res)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(res.Files)+1 {
		t.Fatalf("%d entries in the export directory, want %d tables and the manifest", len(ents), len(res.Files))
	}
}

const pyParquetToArrow = `
import sys, pyarrow.parquet as pq, pyarrow.ipc as ipc
t = pq.read_table(sys.argv[1])
with ipc.new_file(sys.argv[2], t.schema) as w:
    w.write_table(t)
`

// duckParquetToArrow reads the Parquet file with DuckDB (its own Parquet
// reader) and hands its result to Arrow.
const duckParquetToArrow = `
import sys, duckdb, pyarrow.ipc as ipc
con = duckdb.connect()
con.execute("SET TimeZone='UTC'")
t = con.execute("SELECT * FROM read_parquet(?)", [sys.argv[1]]).fetch_arrow_table()
with ipc.new_file(sys.argv[2], t.schema) as w:
    w.write_table(t)
`

// emptyAsNull is the Arrow schema of a Parquet export as pyarrow reads it:
// every struct of no fields a nullable column of the null type.
func emptyAsNull(s *arrow.Schema) *arrow.Schema {
	var conv func(f arrow.Field) arrow.Field
	conv = func(f arrow.Field) arrow.Field {
		st, ok := f.Type.(*arrow.StructType)
		if !ok {
			return f
		}
		if st.NumFields() == 0 {
			return arrow.Field{Name: f.Name, Type: arrow.Null, Nullable: true}
		}
		fs := slices.Clone(st.Fields())
		for i := range fs {
			fs[i] = conv(fs[i])
		}
		return arrow.Field{Name: f.Name, Type: arrow.StructOf(fs...), Nullable: f.Nullable}
	}
	fs := slices.Clone(s.Fields())
	for i := range fs {
		fs[i] = conv(fs[i])
	}
	return arrow.NewSchema(fs, nil)
}

func checkParquet(t *testing.T, path string, s *spark.Store, want []string, wantSchema *arrow.Schema) {
	t.Helper()
	py := os.Getenv("REBUCKET_PYTHON")
	if py != "" {
		conv := filepath.Join(t.TempDir(), "from-parquet.arrow")
		if out, err := exec.Command(py, "-c", pyParquetToArrow, path, conv).CombinedOutput(); err != nil {
			t.Fatalf("pyarrow reading %s: %v\n%s", path, err, out)
		}
		got, schema := readArrowFile(t, conv, s)
		// pyarrow keeps Parquet's required/optional as nullability: the
		// fixed columns and key/value are required, the fields optional.
		// An empty struct is a null column in Parquet.
		if !schema.Equal(emptyAsNull(wantSchema)) {
			t.Fatalf("%s read by pyarrow: schema\n%s\nwant\n%s", path, schema, wantSchema)
		}
		sameRows(t, filepath.Base(path)+" (pyarrow)", got, want)
		if out, err := exec.Command(py, "-c", duckParquetToArrow, path, conv+".duck").CombinedOutput(); err != nil {
			t.Fatalf("DuckDB reading %s: %v\n%s", path, err, out)
		}
		got, _ = readArrowFile(t, conv+".duck", s)
		sameRows(t, filepath.Base(path)+" (DuckDB)", got, want)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if pf.NumRows() != int64(len(want)) {
		t.Fatalf("%s: %d rows, the checkpoint has %d", path, pf.NumRows(), len(want))
	}
	var names []string
	for _, fl := range pf.Schema().Fields() {
		names = append(names, fl.Name())
	}
	if strings.Join(names, ",") != "operator,operator_name,store,partition,key,value" {
		t.Fatalf("%s: columns %v", path, names)
	}
}

// TestExportRealCheckpoints exports every checkpoint real Spark wrote and
// reads each table back: every row equals the engine's decoding of the
// checkpoint (itself checked against Spark's statestore reader).
func TestExportRealCheckpoints(t *testing.T) {
	for _, d := range realCheckpoints(t) {
		name := strings.TrimPrefix(d, "../testdata/")
		t.Run(name, func(t *testing.T) {
			c, err := spark.Open(d)
			if err != nil {
				t.Fatal(err)
			}
			exportAndCheck(t, c)
		})
	}
}

// TestExportMatchesSparkReader compares the Arrow tables of the interop
// checkpoints with expected_state.jsonl, every row as Spark's own
// statestore reader shows it: operator, store, partition, key and value.
func TestExportMatchesSparkReader(t *testing.T) {
	exps, _ := filepath.Glob("../testdata/interop/*/expected_state.jsonl")
	if len(exps) < 7 {
		t.Fatalf("%d expected_state.jsonl files", len(exps))
	}
	for _, exp := range exps {
		base := filepath.Dir(exp)
		if strings.HasPrefix(filepath.Base(base), "tws") {
			continue // transformWithState rows are exported as stored bytes
		}
		t.Run(filepath.Base(base), func(t *testing.T) {
			c, err := spark.Open(filepath.Join(base, "checkpoint"))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			f, err := os.Open(exp)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var r struct {
					Key       map[string]any `json:"key"`
					Value     map[string]any `json:"value"`
					OpID      int            `json:"operatorId"`
					Store     string         `json:"store"`
					Partition int            `json:"partition_id"`
				}
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatal(err)
				}
				want = append(want, fmt.Sprintf("%d|%s|%d|%s|%s", r.OpID, r.Store, r.Partition, jsonOf(r.Key), jsonOf(r.Value)))
			}
			dir := t.TempDir()
			res, err := Export(context.Background(), c, dir, Options{Format: Arrow})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, file := range res.Files {
				r, err := os.Open(filepath.Join(dir, file.Name))
				if err != nil {
					t.Fatal(err)
				}
				fr, err := ipc.NewFileReader(r)
				if err != nil {
					t.Fatal(err)
				}
				for b := 0; b < fr.NumRecords(); b++ {
					rec, _ := fr.Record(b)
					for i := 0; i < int(rec.NumRows()); i++ {
						got = append(got, fmt.Sprintf("%d|%s|%d|%s|%s", rec.Column(0).(*array.Int32).Value(i),
							rec.Column(2).(*array.String).Value(i), rec.Column(3).(*array.Int32).Value(i),
							structJSON(rec.Column(4).(*array.Struct), i), structJSON(rec.Column(5).(*array.Struct), i)))
					}
				}
				fr.Close()
				r.Close()
			}
			sameRows(t, filepath.Base(base)+" against Spark's reader", got, want)
		})
	}
}

// jsonOf renders a JSON object with sorted keys (encoding/json's rule).
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	var norm any
	json.Unmarshal(b, &norm)
	b, _ = json.Marshal(norm)
	return string(b)
}

// structJSON is Arrow's own JSON of a struct row, without the fields of
// Spark's void type: its statestore reader shows dropDuplicates' dummy
// value as {}.
func structJSON(a *array.Struct, i int) string {
	b, err := json.Marshal(a.GetOneForMarshal(i))
	if err != nil {
		return err.Error()
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	st := a.DataType().(*arrow.StructType)
	for _, f := range st.Fields() {
		if f.Type.ID() == arrow.NULL {
			delete(m, f.Name)
		}
	}
	return jsonOf(m)
}

// ---- every Catalyst type, through the UnsafeRow encoder ----

func field(name string, t *unsaferow.Type) unsaferow.Field {
	return unsaferow.Field{Name: name, Type: t, Nullable: true}
}

func kind(k unsaferow.Kind) *unsaferow.Type { return &unsaferow.Type{Kind: k} }

func dec(p, s int) *unsaferow.Type {
	return &unsaferow.Type{Kind: unsaferow.Decimal, Precision: p, Scale: s}
}

func strct(fs ...unsaferow.Field) *unsaferow.Type {
	return &unsaferow.Type{Kind: unsaferow.Struct, Fields: fs}
}

func decv(s string, scale int) unsaferow.DecimalValue {
	u, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return unsaferow.DecimalValue{Unscaled: u, Scale: scale}
}

// allTypes is a value schema with every type the UnsafeRow codec knows.
var allTypes = strct(
	field("s", kind(unsaferow.String)), field("i", kind(unsaferow.Int)), field("l", kind(unsaferow.Long)),
	field("sh", kind(unsaferow.Short)), field("by", kind(unsaferow.Byte)), field("bo", kind(unsaferow.Boolean)),
	field("f", kind(unsaferow.Float)), field("d", kind(unsaferow.Double)), field("bin", kind(unsaferow.Binary)),
	field("dt", kind(unsaferow.Date)), field("ts", kind(unsaferow.Timestamp)), field("tsn", kind(unsaferow.TimestampNTZ)),
	field("d5", dec(5, 2)), field("d18", dec(18, 3)), field("d38", dec(38, 10)), field("d20", dec(20, 0)),
	field("v", kind(unsaferow.Null)),
	field("st", strct(field("a", kind(unsaferow.Int)), field("in", strct(field("x", kind(unsaferow.String)), field("y", kind(unsaferow.Double)))))),
	field("empty", strct()),
)

func allTypesRows() [][]any {
	full := []any{
		"héllo Ω", int32(math.MinInt32), int64(math.MaxInt64), int16(math.MinInt16), int8(127), true,
		float32(math.Copysign(0, -1)), math.Inf(-1), []byte{0, 1, 0xff}, int32(-719162), int64(-62135596800000000), int64(1767225600123456),
		decv("-99999", 2), decv("999999999999999999", 3), decv("-99999999999999999999999999999999999999", 10), decv("12345678901234567890", 0),
		nil, []any{int32(7), []any{"", math.NaN()}}, []any{},
	}
	var rows [][]any
	rows = append(rows, full)
	// Every field null in turn, then all of them.
	for i := range full {
		r := slices.Clone(full)
		r[i] = nil
		rows = append(rows, r)
	}
	rows = append(rows, make([]any, len(full)))
	// A struct present with null fields, and one present with a null struct.
	r := slices.Clone(full)
	r[17] = []any{nil, nil}
	rows = append(rows, r)
	r = slices.Clone(full)
	r[17] = []any{int32(-1), []any{nil, float64(1.5)}}
	r[4], r[3], r[2], r[1] = int8(-128), int16(32767), int64(math.MinInt64), int32(0)
	r[6], r[7] = float32(math.MaxFloat32), math.SmallestNonzeroFloat64
	r[12], r[13], r[14] = decv("0", 2), decv("-1", 3), decv("99999999999999999999999999999999999999", 10)
	r[10], r[11] = int64(253402300799999999), int64(0)
	rows = append(rows, r)
	return rows
}

// buildCheckpoint makes a checkpoint whose one store has the given schemas
// and rows (encoded by unsaferow.Encode, Spark's UnsafeRowWriter layout):
// a generated checkpoint with its schema file and state replaced.
func buildCheckpoint(t *testing.T, key, value *unsaferow.Type, keys, values [][]any) *spark.Checkpoint {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := spark.Generate(dir, spark.GenerateOptions{Keys: 0, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	var schema []byte
	schema = binary.BigEndian.AppendUint16(schema, 2)
	schema = append(schema, "v2"...)
	for _, s := range []string{key.JSON(), value.JSON()} {
		schema = binary.BigEndian.AppendUint32(schema, 1)
		schema = binary.BigEndian.AppendUint16(schema, uint16(len(s)))
		schema = append(schema, s...)
	}
	if err := os.WriteFile(filepath.Join(dir, "state/0/0/_metadata/schema"), schema, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "state/0/0/_metadata/.schema.crc"))
	for p := range 2 {
		var raw []byte
		for i := p; i < len(keys); i += 2 {
			k, err := unsaferow.Encode(key, keys[i])
			if err != nil {
				t.Fatal(err)
			}
			v, err := unsaferow.Encode(value, values[i])
			if err != nil {
				t.Fatal(err)
			}
			raw = spark.AppendRecord(raw, k, v, false)
		}
		raw = append(raw, spark.EndRecord...)
		path := filepath.Join(dir, "state/0", fmt.Sprint(p), "1.delta")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		z := lz4java.NewWriter(f, 0)
		if _, err := z.Write(raw); err != nil {
			t.Fatal(err)
		}
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		os.Remove(filepath.Join(filepath.Dir(path), ".1.delta.crc"))
	}
	c, err := spark.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestExportEveryType round-trips every Catalyst type through the UnsafeRow
// encoder into a checkpoint and out through the export: each typed Arrow
// value (and, with REBUCKET_PYTHON, each value pyarrow reads from the
// Parquet file) equals what was encoded.
func TestExportEveryType(t *testing.T) {
	values := allTypesRows()
	keyT := strct(field("k", kind(unsaferow.String)))
	var keys [][]any
	for i := range values {
		keys = append(keys, []any{fmt.Sprintf("k%d", i)})
	}
	c := buildCheckpoint(t, keyT, allTypes, keys, values)
	s := c.Operators[0].Stores[0]
	if s.ValueSchema == nil {
		t.Fatalf("value schema not parsed: %s", s.ValueSchemaErr)
	}
	dir := exportAndCheck(t, c)
	// The rows read back equal the values encoded (not only the engine's
	// decoding of them).
	got, schema := readArrowFile(t, filepath.Join(dir, "0-default.arrow"), s)
	var want []string
	for i := range values {
		v := slices.Clone(values[i])
		v[16] = nil // void: always null
		want = append(want, fmt.Sprintf("0|stateStoreSave|default|%d|%s|%s", i%2, canon(keys[i]), canon(v)))
	}
	sameRows(t, "every type", got, want)
	vt := schema.Field(5).Type.(*arrow.StructType)
	for name, typ := range map[string]string{
		"s": "utf8", "i": "int32", "l": "int64", "sh": "int16", "by": "int8", "bo": "bool", "f": "float32", "d": "float64",
		"bin": "binary", "dt": "date32", "ts": "timestamp[us, tz=UTC]", "tsn": "timestamp[us]", "d5": "decimal(5, 2)",
		"d18": "decimal(18, 3)", "d38": "decimal(38, 10)", "d20": "decimal(20, 0)", "v": "null",
		"st": "struct<a: int32, in: struct<x: utf8, y: float64>>", "empty": "struct<>",
	} {
		f, ok := vt.FieldByName(name)
		if !ok || f.Type.String() != typ || !f.Nullable {
			t.Errorf("value.%s: %v (found %t), want nullable %s", name, f.Type, ok, typ)
		}
	}
}

// TestExportGlobalAggregationKey: a store whose key has no fields (a
// global aggregation) exports an empty struct to Arrow and a null column
// to Parquet, which has no empty group.
func TestExportGlobalAggregationKey(t *testing.T) {
	valT := strct(field("count", kind(unsaferow.Long)))
	c := buildCheckpoint(t, strct(), valT, [][]any{{}}, [][]any{{int64(42)}})
	exportAndCheck(t, c)
}

// TestExportUnparsedSchema: a schema rebucket cannot parse (an array)
// exports the UnsafeRow bytes, so nothing is lost.
func TestExportUnparsedSchema(t *testing.T) {
	keyT := strct(field("k", kind(unsaferow.String)))
	valT := strct(field("n", kind(unsaferow.Long)))
	c := buildCheckpoint(t, keyT, valT, [][]any{{"a"}, {"b"}}, [][]any{{int64(1)}, {nil}})
	s := c.Operators[0].Stores[0]
	s.ValueSchema, s.ValueSchemaErr = nil, "array<int> is not supported"
	dir := exportAndCheck(t, c)
	b, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	if !strings.Contains(string(b), "array<int> is not supported") {
		t.Fatalf("the manifest does not say why the value is raw:\n%s", b)
	}
}

// TestExportDamagedRow: bytes that do not decode by their schema fail the
// export with ErrCorrupt naming the store and partition.
func TestExportDamagedRow(t *testing.T) {
	keyT := strct(field("k", kind(unsaferow.String)))
	valT := strct(field("d", dec(5, 2)))
	for name, v := range map[string][]any{
		"decimal beyond its precision": {decv("100000", 2)},
	} {
		t.Run(name, func(t *testing.T) {
			c := buildCheckpoint(t, keyT, valT, [][]any{{"a"}}, [][]any{v})
			for _, f := range []Format{Parquet, Arrow} {
				_, err := Export(context.Background(), c, t.TempDir(), Options{Format: f})
				if !errors.Is(err, snapshotfmt.ErrCorrupt) || !strings.Contains(err.Error(), "partition 0") {
					t.Fatalf("%s: %v, want ErrCorrupt naming the partition", f, err)
				}
			}
		})
	}
	// A string whose offset points outside the row.
	c := buildCheckpoint(t, keyT, valT, [][]any{{"a"}}, [][]any{{decv("1", 2)}})
	s := c.Operators[0].Stores[0]
	s.KeySchema = strct(field("k", kind(unsaferow.String)), field("extra", kind(unsaferow.String)))
	_, err := Export(context.Background(), c, t.TempDir(), Options{Format: Arrow})
	if !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Fatalf("%v, want ErrCorrupt", err)
	}
}

func TestExportRefusesBadOptions(t *testing.T) {
	c := buildCheckpoint(t, strct(field("k", kind(unsaferow.String))), strct(field("n", kind(unsaferow.Long))), nil, nil)
	for _, o := range []Options{{Format: "jsonl"}, {Format: Arrow, Compression: "snappy"}, {Format: Parquet, Compression: "lzma"}} {
		if _, err := Export(context.Background(), c, t.TempDir(), o); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", o, err)
		}
	}
}

func TestDecimalBytes(t *testing.T) {
	// Parquet's table of the least FIXED_LEN_BYTE_ARRAY per precision.
	for p, n := range map[int]int{1: 1, 2: 1, 3: 2, 4: 2, 9: 4, 10: 5, 18: 8, 19: 9, 20: 9, 38: 16} {
		if got := decimalBytes(p); got != n {
			t.Errorf("decimalBytes(%d) = %d, want %d", p, got, n)
		}
	}
}

// TestExportProgress: the rows exported are reported, in rows.
func TestExportProgress(t *testing.T) {
	c, err := spark.Open("../testdata/real/join")
	if err != nil {
		t.Fatal(err)
	}
	rec := &progress.Recorder{}
	res, err := Export(context.Background(), c, t.TempDir(), Options{Format: Parquet, Progress: rec})
	if err != nil {
		t.Fatal(err)
	}
	ph := rec.Phases()
	if len(ph) != 1 || ph[0].Unit != progress.Rows || ph[0].Done != int64(res.Rows) || !ph[0].Finished || res.Rows != 340 {
		t.Fatalf("phases %+v for %d rows", ph, res.Rows)
	}
}
