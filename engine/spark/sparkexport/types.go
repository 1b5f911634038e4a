// Package sparkexport writes the state of a Spark checkpoint as typed
// tables: one Parquet or Arrow IPC file per operator and store, one row per
// state row, with the key and value decoded from UnsafeRow by the store's
// state schema into struct columns of Arrow and Parquet types. It never
// prints; cmd/rebucket renders what it returns.
package sparkexport

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"

	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// ArrowType maps a Catalyst type to the Arrow type its values are exported
// as: string utf8, integer int32, long int64, short int16, byte int8,
// float float32, double float64, boolean bool, binary binary, date date32,
// timestamp timestamp[us, UTC], timestamp_ntz timestamp[us], decimal(p,s)
// decimal128(p,s), void null, struct struct (every field nullable: Spark's
// nullability flags are not trusted to hold for every stored row).
func ArrowType(t *unsaferow.Type) (arrow.DataType, error) {
	switch t.Kind {
	case unsaferow.Boolean:
		return arrow.FixedWidthTypes.Boolean, nil
	case unsaferow.Byte:
		return arrow.PrimitiveTypes.Int8, nil
	case unsaferow.Short:
		return arrow.PrimitiveTypes.Int16, nil
	case unsaferow.Int:
		return arrow.PrimitiveTypes.Int32, nil
	case unsaferow.Long:
		return arrow.PrimitiveTypes.Int64, nil
	case unsaferow.Float:
		return arrow.PrimitiveTypes.Float32, nil
	case unsaferow.Double:
		return arrow.PrimitiveTypes.Float64, nil
	case unsaferow.String:
		return arrow.BinaryTypes.String, nil
	case unsaferow.Binary:
		return arrow.BinaryTypes.Binary, nil
	case unsaferow.Date:
		return arrow.FixedWidthTypes.Date32, nil
	case unsaferow.Timestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil
	case unsaferow.TimestampNTZ:
		return &arrow.TimestampType{Unit: arrow.Microsecond}, nil
	case unsaferow.Decimal:
		return &arrow.Decimal128Type{Precision: int32(t.Precision), Scale: int32(t.Scale)}, nil
	case unsaferow.Null:
		return arrow.Null, nil
	case unsaferow.Struct:
		if err := uniqueNames(t); err != nil {
			return nil, err
		}
		fs := make([]arrow.Field, len(t.Fields))
		for i, f := range t.Fields {
			ft, err := ArrowType(f.Type)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			fs[i] = arrow.Field{Name: f.Name, Type: ft, Nullable: true}
		}
		return arrow.StructOf(fs...), nil
	}
	return nil, fmt.Errorf("%w: Catalyst type %s has no Arrow mapping", snapshotfmt.ErrUnsupported, t)
}

// uniqueNames refuses a struct with two fields of one name: Parquet groups
// are keyed by name.
func uniqueNames(t *unsaferow.Type) error {
	seen := map[string]bool{}
	for _, f := range t.Fields {
		if seen[f.Name] {
			return fmt.Errorf("%w: struct %s has two fields named %q", snapshotfmt.ErrUnsupported, t, f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}

// ParquetNode maps a Catalyst type to the Parquet node of the same logical
// type as ArrowType (what pyarrow and DuckDB read back as that Arrow
// type): INT(8/16/32/64, signed), FLOAT, DOUBLE, BOOLEAN, STRING, plain
// BYTE_ARRAY, DATE, TIMESTAMP(MICROS, isAdjustedToUTC true for timestamp,
// false for timestamp_ntz), DECIMAL(p,s) in INT32 (p <= 9), INT64 (p <= 18)
// or FIXED_LEN_BYTE_ARRAY (as Spark's own Parquet writer stores them), the
// NULL logical type for void and for a struct of no fields, and a group in the struct's field order. The
// node is not wrapped in Optional: the caller decides.
func ParquetNode(t *unsaferow.Type) (parquet.Node, error) {
	switch t.Kind {
	case unsaferow.Boolean:
		return parquet.Leaf(parquet.BooleanType), nil
	case unsaferow.Byte:
		return parquet.Int(8), nil
	case unsaferow.Short:
		return parquet.Int(16), nil
	case unsaferow.Int:
		return parquet.Int(32), nil
	case unsaferow.Long:
		return parquet.Int(64), nil
	case unsaferow.Float:
		return parquet.Leaf(parquet.FloatType), nil
	case unsaferow.Double:
		return parquet.Leaf(parquet.DoubleType), nil
	case unsaferow.String:
		return parquet.String(), nil
	case unsaferow.Binary:
		return parquet.Leaf(parquet.ByteArrayType), nil
	case unsaferow.Date:
		return parquet.Date(), nil
	case unsaferow.Timestamp:
		return parquet.TimestampAdjusted(parquet.Microsecond, true), nil
	case unsaferow.TimestampNTZ:
		return parquet.TimestampAdjusted(parquet.Microsecond, false), nil
	case unsaferow.Decimal:
		var phys parquet.Type
		switch {
		case t.Precision <= 9:
			phys = parquet.Int32Type
		case t.Precision <= unsaferow.MaxLongDigits:
			phys = parquet.Int64Type
		default:
			phys = parquet.FixedLenByteArrayType(decimalBytes(t.Precision))
		}
		return parquet.Decimal(t.Scale, t.Precision, phys), nil
	case unsaferow.Null:
		return parquet.Leaf(voidType{parquet.Int32Type}), nil
	case unsaferow.Struct:
		if len(t.Fields) == 0 {
			// Parquet has no empty group: an always-null column stands
			// for a struct of no fields (a global aggregation's key).
			return parquet.Leaf(voidType{parquet.Int32Type}), nil
		}
		if err := uniqueNames(t); err != nil {
			return nil, err
		}
		g := orderedGroup{group: parquet.Group{}}
		for _, f := range t.Fields {
			n, err := ParquetNode(f.Type)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			g.group[f.Name] = parquet.Optional(n)
			g.order = append(g.order, f.Name)
		}
		return g, nil
	}
	return nil, fmt.Errorf("%w: Catalyst type %s has no Parquet mapping", snapshotfmt.ErrUnsupported, t)
}

// decimalBytes is the least FIXED_LEN_BYTE_ARRAY length that holds every
// unscaled value of the precision in two's complement (Parquet's rule:
// precision <= floor(log10(2^(8n-1) - 1))).
func decimalBytes(precision int) int {
	for n := 1; ; n++ {
		// digits of 2^(8n-1)-1: floor((8n-1)*log10(2))
		if float64(8*n-1)*0.30102999566398120 >= float64(precision) {
			return n
		}
	}
}

// voidType is INT32 with the NULL logical type, as pyarrow writes a column
// of Arrow's null type (parquet-go keeps its own null type unexported).
type voidType struct{ parquet.Type }

var nullLogical = format.LogicalType{Value: new(format.NullType)}

func (voidType) String() string                     { return "NULL" }
func (voidType) LogicalType() *format.LogicalType   { return &nullLogical }
func (v voidType) ColumnOrder() *format.ColumnOrder { return v.Type.ColumnOrder() }

// orderedGroup is a Parquet group whose fields keep the order of the Spark
// struct (parquet.Group sorts them by name), so that the columns read back
// in the order Spark's schema gives them.
type orderedGroup struct {
	group parquet.Group
	order []string
}

func (g orderedGroup) ID() int                     { return 0 }
func (g orderedGroup) String() string              { return g.group.String() }
func (g orderedGroup) Type() parquet.Type          { return g.group.Type() }
func (g orderedGroup) Optional() bool              { return false }
func (g orderedGroup) Repeated() bool              { return false }
func (g orderedGroup) Required() bool              { return true }
func (g orderedGroup) Leaf() bool                  { return false }
func (g orderedGroup) Encoding() encoding.Encoding { return nil }
func (g orderedGroup) GoType() reflect.Type        { return g.group.GoType() }
func (g orderedGroup) Compression() compress.Codec { return nil }

func (g orderedGroup) Fields() []parquet.Field {
	fs := slices.Clone(g.group.Fields())
	pos := make(map[string]int, len(g.order))
	for i, n := range g.order {
		pos[n] = i
	}
	slices.SortFunc(fs, func(a, b parquet.Field) int { return pos[a.Name()] - pos[b.Name()] })
	return fs
}
