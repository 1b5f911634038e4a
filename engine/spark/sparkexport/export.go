package sparkexport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/rebucket/rebucket/engine/spark"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Format is the file format of an export.
type Format string

// The typed formats (JSON Lines stays the command's).
const (
	Parquet Format = "parquet"
	Arrow   Format = "arrow"
)

// Ext is the file name extension of the format, with its dot.
func (f Format) Ext() string { return "." + string(f) }

// ManifestName is the file every export directory holds beside its tables:
// what was exported, from which checkpoint, into which files. Names
// starting with "_" are skipped by pyarrow datasets, Spark and the usual
// globs (dir/*.parquet).
const ManifestName = "_rebucket_export.json"

// The fixed columns, before key and value.
const (
	ColOperator     = "operator"      // int32, the operator id (state/<id>)
	ColOperatorName = "operator_name" // utf8, Spark's operator name
	ColStore        = "store"         // utf8, the store name
	ColPartition    = "partition"     // int32, the state partition
	ColKey          = "key"           // struct of the key schema
	ColValue        = "value"         // struct of the value schema
)

// Options shape an export.
type Options struct {
	Format Format
	// Compression: Parquet takes zstd (default), snappy or none; Arrow
	// none (default: every Arrow reader reads it) or zstd.
	Compression string
	// RowGroupRows bounds a Parquet row group (default 1Mi rows).
	RowGroupRows int
	// BatchRows bounds an Arrow record batch (default 64Ki rows).
	BatchRows int
	// Progress receives the rows exported (total unknown).
	Progress progress.Reporter
}

// File is one table of an export.
type File struct {
	Name         string `json:"file"` // inside the export directory
	Operator     int    `json:"operator"`
	OperatorName string `json:"operator_name"`
	Store        string `json:"store"`
	Rows         uint64 `json:"rows"`
	// KeySchema and ValueSchema are Spark's simpleString of the schemas;
	// "" when the schema could not be parsed and the column holds the
	// UnsafeRow bytes (KeySchemaError says why).
	KeySchema        string `json:"key_schema"`
	ValueSchema      string `json:"value_schema"`
	KeySchemaError   string `json:"key_schema_error,omitempty"`
	ValueSchemaError string `json:"value_schema_error,omitempty"`
}

// Result is what Export wrote; it is also the manifest's content.
type Result struct {
	Checkpoint    string `json:"checkpoint"`
	QueryID       string `json:"query_id"`
	LastCommitted int64  `json:"last_committed_batch"`
	StateVersion  int64  `json:"state_version"`
	Partitions    int    `json:"partitions"`
	Format        Format `json:"format"`
	Files         []File `json:"files"`
	Rows          uint64 `json:"rows"`
}

// FileName is the name of the table of an operator's store: "<id>-<store>"
// and the format's extension (0-default.parquet, 0-left-keyToNumValues.arrow).
func FileName(op *spark.Operator, s *spark.Store, f Format) string {
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, s.Name)
	return strconv.Itoa(op.ID) + "-" + name + f.Ext()
}

// table is one store's table being written.
type table interface {
	add(partition int32, key, value []any, rawKey, rawValue []byte) error
	close() error
}

// Export writes every state row of c at its committed version into dir,
// which must exist and be empty: one file per operator and store (empty
// stores too, so that every schema is there), then ManifestName. It does
// not sync or publish: the caller writes into a temporary directory and
// renames it. Rows whose bytes do not decode by their schema fail the
// export with an error wrapping snapshotfmt.ErrCorrupt.
func Export(ctx context.Context, c *spark.Checkpoint, dir string, o Options) (*Result, error) {
	if o.Format != Parquet && o.Format != Arrow {
		return nil, fmt.Errorf("%w: export format %q: want parquet or arrow", snapshotfmt.ErrInvalidArgument, o.Format)
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = 1 << 20
	}
	if o.BatchRows <= 0 {
		o.BatchRows = 64 << 10
	}
	if _, err := codecOf(o.Format, o.Compression); err != nil {
		return nil, err
	}
	pr := progress.OrNop(o.Progress)
	progress.StartUnit(pr, 0, "exporting Spark state", progress.Rows)
	defer pr.Finish()
	res := &Result{Checkpoint: c.Dir, QueryID: c.QueryID, LastCommitted: c.LastCommitted,
		StateVersion: c.StateVersion(), Partitions: c.Partitions, Format: o.Format}
	// c.ForEachRow goes operator by operator, store by store (whatever
	// the state store provider): one table is open at a time.
	files := map[*spark.Store]*File{}
	var cur *openTable
	const tick = 4096
	var pending int64
	err := c.ForEachRow(ctx, func(r spark.Row) error {
		if cur == nil || cur.s != r.Store {
			if cur != nil {
				if err := cur.finish(); err != nil {
					return err
				}
			}
			var err error
			if cur, err = openStore(c, r.Operator, r.Store, dir, o); err != nil {
				return err
			}
			files[r.Store] = cur.f
		}
		kv, err := decode(r.Store.KeySchema, r.Key)
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		vv, err := decode(r.Store.ValueSchema, r.Value)
		if err != nil {
			return fmt.Errorf("value: %w", err)
		}
		cur.f.Rows++
		if pending++; pending == tick {
			pr.Add(pending)
			pending = 0
		}
		return cur.t.add(int32(r.Partition), kv, vv, r.Key, r.Value)
	})
	if err == nil && cur != nil {
		err = cur.finish()
	} else if cur != nil {
		cur.abort()
	}
	if err != nil {
		return nil, err
	}
	pr.Add(pending)
	// Every store gets its table, an empty one when it holds no row.
	for _, op := range c.Operators {
		for _, s := range op.Stores {
			f := files[s]
			if f == nil {
				t, err := openStore(c, op, s, dir, o)
				if err != nil {
					return nil, err
				}
				if err := t.finish(); err != nil {
					return nil, err
				}
				f = t.f
			}
			res.Files = append(res.Files, *f)
			res.Rows += f.Rows
		}
	}
	var m bytes.Buffer
	enc := json.NewEncoder(&m)
	enc.SetEscapeHTML(false) // schemas read struct<k:string>, not \u003c
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	if err := writeSynced(filepath.Join(dir, ManifestName), m.Bytes()); err != nil {
		return nil, err
	}
	return res, nil
}

// openTable is the table of one store being written.
type openTable struct {
	s    *spark.Store
	f    *File
	t    table
	out  *os.File
	path string
}

func openStore(c *spark.Checkpoint, op *spark.Operator, s *spark.Store, dir string, o Options) (*openTable, error) {
	f := &File{Name: FileName(op, s, o.Format), Operator: op.ID, OperatorName: op.Name, Store: s.Name,
		KeySchemaError: s.KeySchemaErr, ValueSchemaError: s.ValueSchemaErr}
	if s.KeySchema != nil {
		f.KeySchema = s.KeySchema.String()
	}
	if s.ValueSchema != nil {
		f.ValueSchema = s.ValueSchema.String()
	}
	path := filepath.Join(dir, f.Name)
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	meta := fileMeta(c, op, s)
	var t table
	if o.Format == Parquet {
		t, err = newParquetTable(out, op, s, meta, o)
	} else {
		t, err = newArrowTable(out, op, s, meta, o)
	}
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("state/%d store %s: %w", op.ID, s.Name, err)
	}
	return &openTable{s: s, f: f, t: t, out: out, path: path}, nil
}

// finish completes the file and syncs it.
func (o *openTable) finish() error {
	if err := o.t.close(); err != nil {
		o.out.Close()
		return fmt.Errorf("write %s: %w", o.path, err)
	}
	if err := o.out.Sync(); err != nil {
		o.out.Close()
		return fmt.Errorf("fsync %s: %w", o.path, err)
	}
	if err := o.out.Close(); err != nil {
		return fmt.Errorf("close %s: %w", o.path, err)
	}
	return nil
}

// abort closes the file after a failure (the caller removes the directory).
func (o *openTable) abort() {
	o.t.close()
	o.out.Close()
}

// decode decodes an UnsafeRow by its schema; a nil schema (one rebucket
// cannot parse) keeps the bytes.
func decode(t *unsaferow.Type, b []byte) ([]any, error) {
	if t == nil {
		return nil, nil
	}
	vals, err := unsaferow.Decode(t, b)
	if err != nil {
		return nil, err
	}
	return vals, checkDecimals(t, vals)
}

// checkDecimals refuses a decimal whose unscaled value has more digits
// than its precision: Arrow's decimal128(p,s) and Parquet's DECIMAL(p,s)
// cannot hold it, and Spark never stores one.
func checkDecimals(t *unsaferow.Type, vals []any) error {
	for i, f := range t.Fields {
		switch {
		case vals[i] == nil:
		case f.Type.Kind == unsaferow.Struct:
			if err := checkDecimals(f.Type, vals[i].([]any)); err != nil {
				return fmt.Errorf("field %q: %w", f.Name, err)
			}
		case f.Type.Kind == unsaferow.Decimal:
			d := vals[i].(unsaferow.DecimalValue)
			if new(big.Int).Abs(d.Unscaled).Cmp(pow10(f.Type.Precision)) >= 0 {
				return fmt.Errorf("%w: field %q: %s does not fit %s", snapshotfmt.ErrCorrupt, f.Name, d, f.Type)
			}
		}
	}
	return nil
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

// fileMeta is the key-value metadata of a table: where it comes from and
// Spark's own schemas, so that a reader can tell a column's Catalyst type.
func fileMeta(c *spark.Checkpoint, op *spark.Operator, s *spark.Store) map[string]string {
	return map[string]string{
		"rebucket.spark.checkpoint":     c.Dir,
		"rebucket.spark.query_id":       c.QueryID,
		"rebucket.spark.state_version":  strconv.FormatInt(c.StateVersion(), 10),
		"rebucket.spark.operator":       strconv.Itoa(op.ID),
		"rebucket.spark.operator_name":  op.Name,
		"rebucket.spark.store":          s.Name,
		"rebucket.spark.key_schema":     s.KeySchemaJSON,
		"rebucket.spark.value_schema":   s.ValueSchemaJSON,
		"rebucket.spark.partitions":     strconv.Itoa(c.Partitions),
		"rebucket.spark.export_version": "1",
	}
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func codecOf(f Format, name string) (compress.Codec, error) {
	if f == Arrow {
		switch name {
		case "", "none", "zstd":
			return nil, nil
		}
		return nil, fmt.Errorf("%w: compression %q: Arrow IPC files take zstd or none", snapshotfmt.ErrInvalidArgument, name)
	}
	switch name {
	case "", "zstd":
		return &zstd.Codec{Level: zstd.SpeedFastest}, nil
	case "snappy":
		return &snappy.Codec{}, nil
	case "none":
		return &uncompressed.Codec{}, nil
	}
	return nil, fmt.Errorf("%w: compression %q: Parquet takes zstd, snappy or none", snapshotfmt.ErrInvalidArgument, name)
}

// ArrowSchema is the schema of a store's table: operator, operator_name,
// store, partition, then key and value as structs of the state schemas'
// fields (or binary UnsafeRow bytes when a schema could not be parsed).
func ArrowSchema(s *spark.Store, meta map[string]string) (*arrow.Schema, error) {
	fs := []arrow.Field{
		{Name: ColOperator, Type: arrow.PrimitiveTypes.Int32},
		{Name: ColOperatorName, Type: arrow.BinaryTypes.String},
		{Name: ColStore, Type: arrow.BinaryTypes.String},
		{Name: ColPartition, Type: arrow.PrimitiveTypes.Int32},
	}
	for _, c := range []struct {
		name string
		t    *unsaferow.Type
	}{{ColKey, s.KeySchema}, {ColValue, s.ValueSchema}} {
		var dt arrow.DataType = arrow.BinaryTypes.Binary
		if c.t != nil {
			var err error
			if dt, err = ArrowType(c.t); err != nil {
				return nil, fmt.Errorf("%s schema: %w", c.name, err)
			}
		}
		fs = append(fs, arrow.Field{Name: c.name, Type: dt})
	}
	var md *arrow.Metadata
	if meta != nil {
		m := arrow.MetadataFrom(meta)
		md = &m
	}
	return arrow.NewSchema(fs, md), nil
}

// ParquetSchema is ArrowSchema in Parquet: the four fixed columns and key
// and value required; the fields inside key and value optional.
func ParquetSchema(s *spark.Store) (*parquet.Schema, error) {
	g := orderedGroup{group: parquet.Group{
		ColOperator:     parquet.Int(32),
		ColOperatorName: parquet.String(),
		ColStore:        parquet.String(),
		ColPartition:    parquet.Int(32),
	}, order: []string{ColOperator, ColOperatorName, ColStore, ColPartition, ColKey, ColValue}}
	for _, c := range []struct {
		name string
		t    *unsaferow.Type
	}{{ColKey, s.KeySchema}, {ColValue, s.ValueSchema}} {
		switch {
		case c.t == nil:
			g.group[c.name] = parquet.Leaf(parquet.ByteArrayType)
		case len(c.t.Fields) == 0:
			// ParquetNode's null column for an empty struct; a null
			// column must be optional.
			g.group[c.name] = parquet.Optional(parquet.Leaf(voidType{parquet.Int32Type}))
		default:
			n, err := ParquetNode(c.t)
			if err != nil {
				return nil, fmt.Errorf("%s schema: %w", c.name, err)
			}
			g.group[c.name] = n
		}
	}
	return parquet.NewSchema("spark_state", g), nil
}
