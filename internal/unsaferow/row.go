package unsaferow

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Row is an UnsafeRow of a struct type, read in place.
type Row struct {
	b []byte
	n int // number of fields
}

// BitsetBytes is the size of the null bitset of a row of n fields.
func BitsetBytes(n int) int { return (n + 63) / 64 * 8 }

// FixedBytes is the size of the bitset and slots of a row of n fields.
func FixedBytes(n int) int { return BitsetBytes(n) + 8*n }

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: UnsafeRow: %s", snapshotfmt.ErrCorrupt, fmt.Sprintf(format, a...))
}

// NewRow checks that b can hold a row of n fields (bitset and slots) and
// returns it. Variable-length fields are checked by Check or when read.
func NewRow(b []byte, n int) (Row, error) {
	if len(b) < FixedBytes(n) {
		return Row{}, corrupt("%d bytes, a row of %d fields needs at least %d", len(b), n, FixedBytes(n))
	}
	return Row{b: b, n: n}, nil
}

// Bytes is the row's bytes.
func (r Row) Bytes() []byte { return r.b }

// NumFields is the row's field count.
func (r Row) NumFields() int { return r.n }

// IsNull says whether field i is null.
func (r Row) IsNull(i int) bool {
	return binary.LittleEndian.Uint64(r.b[i/64*8:])&(1<<(uint(i)%64)) != 0
}

func (r Row) slot(i int) uint64 { return binary.LittleEndian.Uint64(r.b[BitsetBytes(r.n)+8*i:]) }

// Bool, Int8, ... read fixed-width field i (which must not be null).
func (r Row) Bool(i int) bool       { return r.b[BitsetBytes(r.n)+8*i] != 0 }
func (r Row) Int8(i int) int8       { return int8(r.slot(i)) }
func (r Row) Int16(i int) int16     { return int16(r.slot(i)) }
func (r Row) Int32(i int) int32     { return int32(r.slot(i)) }
func (r Row) Int64(i int) int64     { return int64(r.slot(i)) }
func (r Row) Float32(i int) float32 { return math.Float32frombits(uint32(r.slot(i))) }
func (r Row) Float64(i int) float64 { return math.Float64frombits(r.slot(i)) }

// Var returns the bytes of variable-length field i.
func (r Row) Var(i int) ([]byte, error) {
	s := r.slot(i)
	off, size := int64(s>>32), int64(uint32(s))
	if off < int64(FixedBytes(r.n)) || off+size > int64(len(r.b)) {
		return nil, corrupt("field %d: offset %d size %d outside the row of %d bytes", i, off, size, len(r.b))
	}
	return r.b[off : off+size], nil
}

// Struct returns nested struct field i as a row of n fields.
func (r Row) Struct(i, n int) (Row, error) {
	b, err := r.Var(i)
	if err != nil {
		return Row{}, err
	}
	return NewRow(b, n)
}

// Decimal values are returned as this: Unscaled * 10^-Scale.
type DecimalValue struct {
	Unscaled *big.Int
	Scale    int
}

func (d DecimalValue) String() string {
	if d.Unscaled == nil {
		return "<nil>"
	}
	s := new(big.Int).Abs(d.Unscaled).String()
	neg := d.Unscaled.Sign() < 0
	if d.Scale > 0 {
		for len(s) <= d.Scale {
			s = "0" + s
		}
		s = s[:len(s)-d.Scale] + "." + s[len(s)-d.Scale:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// DecimalBytes returns the unscaled big-endian two's-complement bytes of a
// non-compact decimal field (Java's BigInteger.toByteArray), as Spark
// hashes them.
func (r Row) DecimalBytes(i int) ([]byte, error) { return r.Var(i) }

// Values of Decode, by Kind: Boolean bool, Byte int8, Short int16, Int and
// Date int32, Long, Timestamp and TimestampNTZ int64, Float float32, Double
// float64, Decimal DecimalValue, String string, Binary []byte, Struct []any;
// null is nil.

// Decode decodes a row of struct type t. Every offset and size is checked,
// so damaged bytes give an error wrapping snapshotfmt.ErrCorrupt.
func Decode(t *Type, b []byte) ([]any, error) {
	r, err := NewRow(b, len(t.Fields))
	if err != nil {
		return nil, err
	}
	return decodeRow(t, r, 0)
}

const maxDepth = 64

func decodeRow(t *Type, r Row, depth int) ([]any, error) {
	if depth > maxDepth {
		return nil, corrupt("structs nested deeper than %d", maxDepth)
	}
	out := make([]any, len(t.Fields))
	for i, f := range t.Fields {
		if r.IsNull(i) {
			continue
		}
		v, err := decodeField(f.Type, r, i, depth)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		out[i] = v
	}
	return out, nil
}

func decodeField(t *Type, r Row, i, depth int) (any, error) {
	switch t.Kind {
	case Boolean:
		return r.Bool(i), nil
	case Byte:
		return r.Int8(i), nil
	case Short:
		return r.Int16(i), nil
	case Int, Date:
		return r.Int32(i), nil
	case Long, Timestamp, TimestampNTZ:
		return r.Int64(i), nil
	case Float:
		return r.Float32(i), nil
	case Double:
		return r.Float64(i), nil
	case Decimal:
		if t.Compact() {
			return DecimalValue{Unscaled: big.NewInt(r.Int64(i)), Scale: t.Scale}, nil
		}
		b, err := r.Var(i)
		if err != nil {
			return nil, err
		}
		if len(b) == 0 || len(b) > 16 {
			return nil, corrupt("decimal(%d,%d) of %d bytes", t.Precision, t.Scale, len(b))
		}
		return DecimalValue{Unscaled: fromTwos(b), Scale: t.Scale}, nil
	case String:
		b, err := r.Var(i)
		return string(b), err
	case Binary:
		b, err := r.Var(i)
		if err != nil {
			return nil, err
		}
		return append([]byte{}, b...), nil
	case Struct:
		nr, err := r.Struct(i, len(t.Fields))
		if err != nil {
			return nil, err
		}
		return decodeRow(t, nr, depth+1)
	case Null:
		return nil, nil
	}
	return nil, fmt.Errorf("%w: type %s", snapshotfmt.ErrUnsupported, t)
}

// fromTwos reads big-endian two's complement.
func fromTwos(b []byte) *big.Int {
	v := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return v
}

// ToTwos is Java's BigInteger.toByteArray: minimal big-endian two's complement.
func ToTwos(v *big.Int) []byte {
	if v.Sign() >= 0 {
		b := v.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -v-1 in magnitude, bits inverted.
	m := new(big.Int).Neg(v)
	m.Sub(m, big.NewInt(1))
	b := m.Bytes()
	if len(b) == 0 || b[0]&0x80 != 0 {
		b = append([]byte{0}, b...)
	}
	for i := range b {
		b[i] = ^b[i]
	}
	return b
}

// Encode writes the values of a row of struct type t as Spark's
// UnsafeRowWriter does (zeroed slots and padding, a non-compact decimal
// always reserving 16 bytes).
func Encode(t *Type, vals []any) ([]byte, error) {
	if len(vals) != len(t.Fields) {
		return nil, fmt.Errorf("%w: %d values for %d fields", snapshotfmt.ErrInvalidArgument, len(vals), len(t.Fields))
	}
	n := len(t.Fields)
	b := make([]byte, FixedBytes(n))
	bs := BitsetBytes(n)
	setNull := func(i int) { b[i/64*8+(i%64)/8] |= 1 << (uint(i) % 8) }
	for i, f := range t.Fields {
		v := vals[i]
		slot := bs + 8*i
		if v == nil {
			setNull(i)
			if f.Type.Kind == Decimal && !f.Type.Compact() {
				// Spark reserves the 16 bytes and keeps the offset.
				binary.LittleEndian.PutUint64(b[slot:], uint64(len(b))<<32)
				b = append(b, make([]byte, 16)...)
			}
			continue
		}
		putVar := func(data []byte, reserve int) {
			binary.LittleEndian.PutUint64(b[slot:], uint64(len(b))<<32|uint64(len(data)))
			size := max(reserve, (len(data)+7)/8*8)
			start := len(b)
			b = append(b, make([]byte, size)...)
			copy(b[start:], data)
		}
		var bad bool
		switch f.Type.Kind {
		case Boolean:
			x, ok := v.(bool)
			if x {
				b[slot] = 1
			}
			bad = !ok
		case Byte:
			x, ok := v.(int8)
			b[slot] = byte(x)
			bad = !ok
		case Short:
			x, ok := v.(int16)
			binary.LittleEndian.PutUint16(b[slot:], uint16(x))
			bad = !ok
		case Int, Date:
			x, ok := v.(int32)
			binary.LittleEndian.PutUint32(b[slot:], uint32(x))
			bad = !ok
		case Long, Timestamp, TimestampNTZ:
			x, ok := v.(int64)
			binary.LittleEndian.PutUint64(b[slot:], uint64(x))
			bad = !ok
		case Float:
			x, ok := v.(float32)
			if x != x {
				x = float32(math.NaN()) // Spark writes the canonical NaN
			}
			binary.LittleEndian.PutUint32(b[slot:], math.Float32bits(x))
			bad = !ok
		case Double:
			x, ok := v.(float64)
			bits := math.Float64bits(x)
			if x != x {
				bits = 0x7ff8000000000000
			}
			binary.LittleEndian.PutUint64(b[slot:], bits)
			bad = !ok
		case Decimal:
			x, ok := v.(DecimalValue)
			if !ok || x.Unscaled == nil || x.Scale != f.Type.Scale {
				bad = true
				break
			}
			if f.Type.Compact() {
				if !x.Unscaled.IsInt64() {
					bad = true
					break
				}
				binary.LittleEndian.PutUint64(b[slot:], uint64(x.Unscaled.Int64()))
			} else {
				tw := ToTwos(x.Unscaled)
				if len(tw) > 16 {
					bad = true
					break
				}
				putVar(tw, 16)
			}
		case String:
			x, ok := v.(string)
			putVar([]byte(x), 0)
			bad = !ok
		case Binary:
			x, ok := v.([]byte)
			putVar(x, 0)
			bad = !ok
		case Struct:
			x, ok := v.([]any)
			if !ok {
				bad = true
				break
			}
			nb, err := Encode(f.Type, x)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			putVar(nb, 0)
		default:
			return nil, fmt.Errorf("%w: type %s", snapshotfmt.ErrUnsupported, f.Type)
		}
		if bad {
			return nil, fmt.Errorf("%w: field %q of type %s: value %T %v", snapshotfmt.ErrInvalidArgument, f.Name, f.Type, v, v)
		}
	}
	return b, nil
}
