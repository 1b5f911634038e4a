// Package unsaferow decodes and encodes Spark's UnsafeRow, the binary row
// of Spark SQL that the state store keeps keys and values in, by a schema
// in Spark's JSON DataType form ({"type":"struct","fields":[...]}).
//
// Layout of a row of n fields: a null bitset of ceil(n/64) little-endian
// 64-bit words (bit i of word i/64 set = field i is null), then one 8-byte
// slot per field, then the variable-length region. Fixed-width values sit
// in their slot (little-endian; narrower types in the low bytes, the rest
// zero). A variable-length value (string, binary, decimal of precision >
// 18, nested struct) has (offset<<32 | size) in its slot, offset from the
// row's start, its bytes padded with zeros to a multiple of 8.
package unsaferow

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Kind is a Catalyst data type.
type Kind uint8

// The supported Catalyst types.
const (
	Invalid Kind = iota
	Boolean
	Byte
	Short
	Int
	Long
	Float
	Double
	Decimal
	String
	Binary
	Date         // int32 days since 1970-01-01
	Timestamp    // int64 microseconds since the epoch, UTC
	TimestampNTZ // int64 microseconds, no time zone
	Struct
	Null // "void": always null (deduplication's dummy value)
)

var kindNames = map[string]Kind{
	"boolean": Boolean, "byte": Byte, "short": Short, "integer": Int, "long": Long,
	"float": Float, "double": Double, "string": String, "binary": Binary,
	"date": Date, "timestamp": Timestamp, "timestamp_ntz": TimestampNTZ, "void": Null,
}

func (k Kind) String() string {
	switch k {
	case Decimal:
		return "decimal"
	case Struct:
		return "struct"
	}
	for n, v := range kindNames {
		if v == k {
			return n
		}
	}
	return "invalid"
}

// MaxLongDigits is the largest decimal precision kept in a long (Spark's
// Decimal.MAX_LONG_DIGITS): such decimals are "compact".
const MaxLongDigits = 18

// Type is a Catalyst data type.
type Type struct {
	Kind             Kind
	Precision, Scale int     // Decimal
	Fields           []Field // Struct
}

// Field is a struct field.
type Field struct {
	Name     string
	Type     *Type
	Nullable bool
}

// Compact says whether a decimal is kept in its slot as an unscaled long.
func (t *Type) Compact() bool { return t.Kind == Decimal && t.Precision <= MaxLongDigits }

// String renders the type as Spark's simpleString does.
func (t *Type) String() string {
	switch t.Kind {
	case Decimal:
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale)
	case Struct:
		var b strings.Builder
		b.WriteString("struct<")
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(f.Name + ":" + f.Type.String())
		}
		b.WriteByte('>')
		return b.String()
	case Int:
		return "int"
	case Long:
		return "bigint"
	case Short:
		return "smallint"
	case Byte:
		return "tinyint"
	}
	return t.Kind.String()
}

// ParseSchema parses Spark's JSON form of a struct type. Types this package
// cannot decode (arrays, maps, intervals, variants, collated strings, UDTs)
// give an error wrapping snapshotfmt.ErrUnsupported naming the type.
func ParseSchema(js []byte) (*Type, error) {
	var raw any
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("%w: Spark schema JSON: %v", snapshotfmt.ErrCorrupt, err)
	}
	t, err := parseType(raw)
	if err != nil {
		return nil, err
	}
	if t.Kind != Struct {
		return nil, fmt.Errorf("%w: Spark schema is %s, not a struct", snapshotfmt.ErrCorrupt, t)
	}
	return t, nil
}

func parseType(v any) (*Type, error) {
	switch x := v.(type) {
	case string:
		if k, ok := kindNames[x]; ok {
			return &Type{Kind: k}, nil
		}
		if strings.HasPrefix(x, "decimal(") && strings.HasSuffix(x, ")") {
			ps := strings.Split(x[len("decimal("):len(x)-1], ",")
			if len(ps) == 2 {
				p, err1 := strconv.Atoi(strings.TrimSpace(ps[0]))
				s, err2 := strconv.Atoi(strings.TrimSpace(ps[1]))
				if err1 == nil && err2 == nil && p >= 1 && p <= 38 && s >= 0 && s <= p {
					return &Type{Kind: Decimal, Precision: p, Scale: s}, nil
				}
			}
			return nil, fmt.Errorf("%w: bad decimal type %q in Spark schema", snapshotfmt.ErrCorrupt, x)
		}
		if x == "decimal" {
			return &Type{Kind: Decimal, Precision: 10, Scale: 0}, nil
		}
		return nil, fmt.Errorf("%w: Spark type %q in a state schema", snapshotfmt.ErrUnsupported, x)
	case map[string]any:
		tn, _ := x["type"].(string)
		if tn != "struct" {
			return nil, fmt.Errorf("%w: Spark type %q in a state schema", snapshotfmt.ErrUnsupported, tn)
		}
		fs, ok := x["fields"].([]any)
		if !ok {
			return nil, fmt.Errorf("%w: Spark struct type without fields", snapshotfmt.ErrCorrupt)
		}
		t := &Type{Kind: Struct}
		for _, f := range fs {
			fm, ok := f.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%w: Spark struct field is not an object", snapshotfmt.ErrCorrupt)
			}
			name, _ := fm["name"].(string)
			ft, err := parseType(fm["type"])
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", name, err)
			}
			nullable, _ := fm["nullable"].(bool)
			if md, ok := fm["metadata"].(map[string]any); ok {
				if c, ok := md["__COLLATIONS"]; ok {
					return nil, fmt.Errorf("%w: field %q has a collated string (%v): Spark hashes it by its collation key", snapshotfmt.ErrUnsupported, name, c)
				}
			}
			t.Fields = append(t.Fields, Field{Name: name, Type: ft, Nullable: nullable})
		}
		return t, nil
	}
	return nil, fmt.Errorf("%w: Spark type %v", snapshotfmt.ErrCorrupt, v)
}

// JSON renders the type in Spark's JSON form (for fixtures and generators).
func (t *Type) JSON() string {
	switch t.Kind {
	case Decimal:
		return strconv.Quote(fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale))
	case Struct:
		var b strings.Builder
		b.WriteString(`{"type":"struct","fields":[`)
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			name, _ := json.Marshal(f.Name)
			fmt.Fprintf(&b, `{"name":%s,"type":%s,"nullable":%t,"metadata":{}}`, name, f.Type.JSON(), f.Nullable)
		}
		b.WriteString("]}")
		return b.String()
	}
	return strconv.Quote(t.Kind.String())
}
