package keytype

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// field is one serializer's format, usable on its own (a key) or inside a
// Tuple or Row.
type field interface {
	name() string
	fixedLen() int
	// read parses one serialized value at the start of b: its length, the
	// Java hashCode() of the deserialized object (0 for null, as
	// Tuple.hashCode and Row.hashCode count null fields), whether it is null,
	// and with want its Go value.
	read(b []byte, want bool) (n int, hash int32, null bool, val any, err error)
	// encode appends the serialized form of a spelled value.
	encode(dst []byte, s string) ([]byte, error)
	// encodeNull appends the serialized null, or fails when the serializer
	// cannot write null (Flink throws NullFieldException for those).
	encodeNull(dst []byte) ([]byte, error)
}

// keyCodec is a field used as a whole key: null keys are impossible in
// Flink (KeyGroupRangeAssignment.assignToKeyGroup checks), so they are
// corrupt here, and a key must fill its bytes exactly.
type keyCodec struct{ f field }

func (c keyCodec) Name() string  { return c.f.name() }
func (c keyCodec) FixedLen() int { return c.f.fixedLen() }

func (c keyCodec) Len(b []byte) (int, error) {
	n, _, null, _, err := c.f.read(b, false)
	if err != nil {
		return 0, err
	}
	if null {
		return 0, corruptf("%s key is null (Flink never stores null keys)", c.f.name())
	}
	return n, nil
}

func (c keyCodec) whole(key []byte, want bool) (int32, any, error) {
	n, h, null, v, err := c.f.read(key, want)
	if err != nil {
		return 0, nil, err
	}
	if null {
		return 0, nil, corruptf("%s key is null (Flink never stores null keys)", c.f.name())
	}
	if n != len(key) {
		return 0, nil, corruptf("%s key is %d bytes but %d were given", c.f.name(), n, len(key))
	}
	return h, v, nil
}

func (c keyCodec) HashCode(key []byte) (int32, error) {
	h, _, err := c.whole(key, false)
	return h, err
}

func (c keyCodec) Decode(key []byte) (any, error) {
	_, v, err := c.whole(key, true)
	return v, err
}

func (c keyCodec) Encode(s string) ([]byte, error) {
	b, err := c.f.encode(nil, s)
	if err != nil {
		return nil, fmt.Errorf("%s key %q: %w", c.f.name(), s, err)
	}
	return b, nil
}

// box makes the Go value only when asked: boxing an int64 allocates, and
// hashing runs once per entry.
func box[T any](want bool, v T) any {
	if want {
		return v
	}
	return nil
}

func truncated(name string, need, have int) error {
	return corruptf("%s truncated: needs %d bytes, %d left", name, need, have)
}

func notNull(dst []byte, name string) ([]byte, error) {
	return dst, invalidf("a %s field cannot be null (Flink's serializer refuses it)", name)
}

// ---- fixed-length primitives (java.io.DataOutput, big-endian) ----

type longField struct{}

func (longField) name() string  { return "Long" }
func (longField) fixedLen() int { return 8 }
func (longField) read(b []byte, want bool) (int, int32, bool, any, error) {
	if len(b) < 8 {
		return 0, 0, false, nil, truncated("Long", 8, len(b))
	}
	v := int64(binary.BigEndian.Uint64(b))
	return 8, longHash(v), false, box(want, v), nil
}
func (longField) encode(dst []byte, s string) ([]byte, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return dst, invalidf("not a Long: %v", err)
	}
	return binary.BigEndian.AppendUint64(dst, uint64(v)), nil
}
func (longField) encodeNull(dst []byte) ([]byte, error) { return notNull(dst, "Long") }

// longHash is Long.hashCode: (int)(v ^ (v >>> 32)).
func longHash(v int64) int32 { return int32(uint64(v) ^ uint64(v)>>32) }

type intField struct{}

func (intField) name() string  { return "Integer" }
func (intField) fixedLen() int { return 4 }
func (intField) read(b []byte, want bool) (int, int32, bool, any, error) {
	if len(b) < 4 {
		return 0, 0, false, nil, truncated("Integer", 4, len(b))
	}
	v := int32(binary.BigEndian.Uint32(b))
	return 4, v, false, box(want, v), nil
}
func (intField) encode(dst []byte, s string) ([]byte, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return dst, invalidf("not an Integer: %v", err)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(v)), nil
}
func (intField) encodeNull(dst []byte) ([]byte, error) { return notNull(dst, "Integer") }

type shortField struct{}

func (shortField) name() string  { return "Short" }
func (shortField) fixedLen() int { return 2 }
func (shortField) read(b []byte, want bool) (int, int32, bool, any, error) {
	if len(b) < 2 {
		return 0, 0, false, nil, truncated("Short", 2, len(b))
	}
	v := int16(binary.BigEndian.Uint16(b))
	return 2, int32(v), false, box(want, v), nil
}
func (shortField) encode(dst []byte, s string) ([]byte, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 16)
	if err != nil {
		return dst, invalidf("not a Short: %v", err)
	}
	return binary.BigEndian.AppendUint16(dst, uint16(v)), nil
}
func (shortField) encodeNull(dst []byte) ([]byte, error) { return notNull(dst, "Short") }

type byteField struct{}

func (byteField) name() string  { return "Byte" }
func (byteField) fixedLen() int { return 1 }
func (byteField) read(b []byte, want bool) (int, int32, bool, any, error) {
	if len(b) < 1 {
		return 0, 0, false, nil, truncated("Byte", 1, len(b))
	}
	v := int8(b[0])
	return 1, int32(v), false, box(want, v), nil
}
func (byteField) encode(dst []byte, s string) ([]byte, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 8)
	if err != nil {
		return dst, invalidf("not a Byte: %v", err)
	}
	return append(dst, byte(v)), nil
}
func (byteField) encodeNull(dst []byte) ([]byte, error) { return notNull(dst, "Byte") }

type boolField struct{}

func (boolField) name() string  { return "Boolean" }
func (boolField) fixedLen() int { return 1 }
func (boolField) read(b []byte, want bool) (int, int32, bool, any, error) {
	if len(b) < 1 {
		return 0, 0, false, nil, truncated("Boolean", 1, len(b))
	}
	// DataInputDeserializer.readBoolean: any non-zero byte is true.
	v := b[0] != 0
	h := int32(1237)
	if v {
		h = 1231
	}
	return 1, h, false, box(want, v), nil
}
func (boolField) encode(dst []byte, s string) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return append(dst, 1), nil
	case "false":
		return append(dst, 0), nil
	}
	return dst, invalidf("not a Boolean: want true or false")
}
func (boolField) encodeNull(dst []byte) ([]byte, error) { return notNull(dst, "Boolean") }

type charField struct{}

func (charField) name() string  { return "Character" }
func (charField) fixedLen() int { return 2 }
func (charField) read(b []byte, want bool) (int, int32, bool, any, error) {
	if len(b) < 2 {
		return 0, 0, false, nil, truncated("Character", 2, len(b))
	}
	v := binary.BigEndian.Uint16(b)
	return 2, int32(v), false, box(want, v), nil
}
func (charField) encode(dst []byte, s string) ([]byte, error) {
	r, size := utf8.DecodeRuneInString(s)
	if size == 0 || size != len(s) || r == utf8.RuneError || r > 0xFFFF {
		return dst, invalidf("not a Character: want exactly one UTF-16 code unit")
	}
	return binary.BigEndian.AppendUint16(dst, uint16(r)), nil
}
func (charField) encodeNull(dst []byte) ([]byte, error) { return notNull(dst, "Character") }

// Java's canonical NaNs (Double.doubleToLongBits, Float.floatToIntBits).
const (
	canonicalNaN64 = 0x7ff8000000000000
	canonicalNaN32 = 0x7fc00000
)

type doubleField struct{}

func (doubleField) name() string  { return "Double" }
func (doubleField) fixedLen() int { return 8 }
func (doubleField) read(b []byte, want bool) (int, int32, bool, any, error) {
	if len(b) < 8 {
		return 0, 0, false, nil, truncated("Double", 8, len(b))
	}
	raw := binary.BigEndian.Uint64(b)
	f := math.Float64frombits(raw)
	// Double.hashCode uses doubleToLongBits, which maps every NaN to the
	// canonical one, whatever bits were stored.
	bits := raw
	if f != f {
		bits = canonicalNaN64
	}
	return 8, longHash(int64(bits)), false, box(want, f), nil
}
func (doubleField) encode(dst []byte, s string) ([]byte, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return dst, invalidf("not a Double: %v", err)
	}
	bits := math.Float64bits(f)
	if f != f {
		// DataOutputSerializer.writeDouble writes doubleToLongBits.
		bits = canonicalNaN64
	}
	return binary.BigEndian.AppendUint64(dst, bits), nil
}
func (doubleField) encodeNull(dst []byte) ([]byte, error) { return notNull(dst, "Double") }

type floatField struct{}

func (floatField) name() string  { return "Float" }
func (floatField) fixedLen() int { return 4 }
func (floatField) read(b []byte, want bool) (int, int32, bool, any, error) {
	if len(b) < 4 {
		return 0, 0, false, nil, truncated("Float", 4, len(b))
	}
	raw := binary.BigEndian.Uint32(b)
	f := math.Float32frombits(raw)
	bits := raw
	if f != f {
		bits = canonicalNaN32
	}
	return 4, int32(bits), false, box(want, f), nil
}
func (floatField) encode(dst []byte, s string) ([]byte, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 32)
	if err != nil {
		return dst, invalidf("not a Float: %v", err)
	}
	bits := math.Float32bits(float32(f))
	if f != f {
		bits = canonicalNaN32
	}
	return binary.BigEndian.AppendUint32(dst, bits), nil
}
func (floatField) encodeNull(dst []byte) ([]byte, error) { return notNull(dst, "Float") }

// ---- String: org.apache.flink.types.StringValue.writeString/readString ----

type stringField struct{}

func (stringField) name() string  { return "String" }
func (stringField) fixedLen() int { return -1 }

// javaVarint reads StringValue's 7-bit groups, low group first, high bit =
// more follows, exactly as readString does: Java masks shift counts to 5
// bits, so over-long runs wrap rather than fail.
func javaVarint(b []byte, i int) (uint32, int, bool) {
	if i >= len(b) {
		return 0, i, false
	}
	v := uint32(b[i])
	i++
	if v < 0x80 {
		return v, i, true
	}
	v &= 0x7f
	shift := uint(7)
	for {
		if i >= len(b) {
			return 0, i, false
		}
		curr := uint32(b[i])
		i++
		if curr < 0x80 {
			return v | curr<<(shift&31), i, true
		}
		v |= (curr & 0x7f) << (shift & 31)
		shift += 7
	}
}

func (stringField) read(b []byte, want bool) (int, int32, bool, any, error) {
	l, i, ok := javaVarint(b, 0)
	if !ok {
		return 0, 0, false, nil, corruptf("String length truncated after %d bytes", len(b))
	}
	if b[0] == 0 {
		return i, 0, true, nil, nil // the null String; an over-long 0 (80 00) is corrupt below, as in Java
	}
	n := int32(l) - 1
	if n < 0 {
		return 0, 0, false, nil, corruptf("String length %d out of range", uint32(l)-1)
	}
	// Each UTF-16 unit takes at least one byte: refuse before looping.
	if int64(n) > int64(len(b)-i) {
		return 0, 0, false, nil, corruptf("String of %d chars truncated: %d bytes left", n, len(b)-i)
	}
	var units []uint16
	if want {
		units = make([]uint16, 0, n)
	}
	var h int32
	for k := int32(0); k < n; k++ {
		var u uint16
		if i < len(b) && b[i] < 0x80 { // ASCII: one byte, the common case
			u = uint16(b[i])
			i++
		} else {
			c, next, ok := javaVarint(b, i)
			if !ok {
				return 0, 0, false, nil, corruptf("String truncated in char %d of %d", k, n)
			}
			i = next
			u = uint16(c) // readString casts to char
		}
		h = 31*h + int32(u)
		if want {
			units = append(units, u)
		}
	}
	var v any
	if want {
		v = string(utf16.Decode(units))
	}
	return i, h, false, v, nil
}

func (stringField) encode(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return dst, invalidf("not valid UTF-8")
	}
	units := utf16.Encode([]rune(s))
	dst = appendJavaVarint(dst, uint32(len(units))+1)
	for _, u := range units {
		dst = appendJavaVarint(dst, uint32(u))
	}
	return dst, nil
}

func (stringField) encodeNull(dst []byte) ([]byte, error) { return append(dst, 0), nil }

// appendJavaVarint is writeString's encoding: 7 bits a byte, low first.
func appendJavaVarint(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// StringHashCode is Java's String.hashCode over the UTF-16 units of s.
func StringHashCode(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// ---- Tuple1..Tuple25: TupleSerializer writes the fields back to back ----

type tupleField struct{ fields []field }

func (t tupleField) name() string {
	names := make([]string, len(t.fields))
	for i, f := range t.fields {
		names[i] = f.name()
	}
	return fmt.Sprintf("Tuple%d<%s>", len(t.fields), strings.Join(names, ","))
}

// fixedLen is TupleSerializerBase.getLength: the sum when every field is
// fixed, else -1.
func (t tupleField) fixedLen() int {
	sum := 0
	for _, f := range t.fields {
		l := f.fixedLen()
		if l < 0 {
			return -1
		}
		sum += l
	}
	return sum
}

func (t tupleField) read(b []byte, want bool) (int, int32, bool, any, error) {
	var vals []any
	if want {
		vals = make([]any, len(t.fields))
	}
	// TupleN.hashCode: result = h(f0); result = 31*result + h(fi); a null
	// field counts 0.
	var h int32
	i := 0
	for k, f := range t.fields {
		n, fh, _, v, err := f.read(b[i:], want)
		if err != nil {
			return 0, 0, false, nil, fmt.Errorf("tuple field %d: %w", k, err)
		}
		i += n
		h = 31*h + fh
		if want {
			vals[k] = v
		}
	}
	var v any
	if want {
		v = vals
	}
	return i, h, false, v, nil
}

func (t tupleField) encode(dst []byte, s string) ([]byte, error) {
	parts, err := splitComposite(s, len(t.fields))
	if err != nil {
		return dst, err
	}
	for k, f := range t.fields {
		if parts[k] == nil {
			dst, err = f.encodeNull(dst)
		} else {
			dst, err = f.encode(dst, *parts[k])
		}
		if err != nil {
			return dst, fmt.Errorf("field %d: %w", k, err)
		}
	}
	return dst, nil
}

func (t tupleField) encodeNull(dst []byte) ([]byte, error) { return notNull(dst, t.name()) }

// ---- Row: RowSerializer, a null mask (with 2 row-kind bits) then the
// non-null fields ----

type rowField struct {
	fields  []field
	rowKind bool
}

func (r rowField) name() string {
	names := make([]string, len(r.fields))
	for i, f := range r.fields {
		names[i] = f.name()
	}
	return fmt.Sprintf("Row<%s>", strings.Join(names, ","))
}

func (r rowField) fixedLen() int { return -1 } // RowSerializer.getLength

func (r rowField) maskBits() int {
	if r.rowKind {
		return len(r.fields) + 2
	}
	return len(r.fields)
}

func (r rowField) read(b []byte, want bool) (int, int32, bool, any, error) {
	bitsN := r.maskBits()
	maskLen := (bitsN + 7) / 8
	if len(b) < maskLen {
		return 0, 0, false, nil, truncated("Row null mask", maskLen, len(b))
	}
	// MaskUtils: bit j of the mask is bit 7-(j%8) of byte j/8.
	bit := func(j int) bool { return b[j/8]&(0x80>>(j%8)) != 0 }
	var kind int32
	off := 0
	if r.rowKind {
		if bit(0) {
			kind |= 1
		}
		if bit(1) {
			kind |= 2
		}
		off = 2
	}
	var vals []any
	if want {
		vals = make([]any, len(r.fields))
	}
	// Row.hashCode = RowUtils.deepHashCodeRow: 31*kind.toByteValue() +
	// deepHashCodeArray(fields), where the array hash starts at 1 and each
	// non-null field adds Arrays.deepHashCode(new Object[]{o}) = 31 + h(o).
	arr := int32(1)
	i := maskLen
	for k, f := range r.fields {
		if bit(off + k) {
			arr = 31 * arr
			continue
		}
		n, fh, null, v, err := f.read(b[i:], want)
		if err != nil {
			return 0, 0, false, nil, fmt.Errorf("row field %d: %w", k, err)
		}
		i += n
		if null {
			arr = 31 * arr
		} else {
			arr = 31*arr + (31 + fh)
		}
		if want {
			vals[k] = v
		}
	}
	var v any
	if want {
		v = vals
	}
	return i, 31*kind + arr, false, v, nil
}

func (r rowField) encode(dst []byte, s string) ([]byte, error) {
	parts, err := splitComposite(s, len(r.fields))
	if err != nil {
		return dst, err
	}
	bitsN := r.maskBits()
	mask := make([]byte, (bitsN+7)/8) // row kind INSERT = 0
	off := bitsN - len(r.fields)
	for k := range r.fields {
		if parts[k] == nil {
			j := off + k
			mask[j/8] |= 0x80 >> (j % 8)
		}
	}
	dst = append(dst, mask...)
	for k, f := range r.fields {
		if parts[k] == nil {
			continue
		}
		if dst, err = f.encode(dst, *parts[k]); err != nil {
			return dst, fmt.Errorf("field %d: %w", k, err)
		}
	}
	return dst, nil
}

func (r rowField) encodeNull(dst []byte) ([]byte, error) { return notNull(dst, r.name()) }

// splitComposite parses a composite key spelling: a JSON array whose
// elements are strings, numbers, booleans or null.
func splitComposite(s string, n int) ([]*string, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, invalidf(`spell a composite key as a JSON array, e.g. ["k1", 42]: %v`, err)
	}
	if len(raw) != n {
		return nil, invalidf("the key has %d fields, the spelling %d", n, len(raw))
	}
	out := make([]*string, n)
	for k, m := range raw {
		t := strings.TrimSpace(string(m))
		switch {
		case t == "null":
		case strings.HasPrefix(t, `"`):
			var str string
			if err := json.Unmarshal(m, &str); err != nil {
				return nil, invalidf("field %d: %v", k, err)
			}
			out[k] = &str
		case strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{"):
			out[k] = &t // a nested composite, spelled as JSON again
		default:
			out[k] = &t // a number or boolean, spelled as is
		}
	}
	return out, nil
}

// ---- RowData: Table/SQL keys are BinaryRowData ----

type rowDataField struct{}

func (rowDataField) name() string  { return "RowData" }
func (rowDataField) fixedLen() int { return -1 }

func (rowDataField) read(b []byte, want bool) (int, int32, bool, any, error) {
	if len(b) < 4 {
		return 0, 0, false, nil, truncated("RowData length", 4, len(b))
	}
	n := int32(binary.BigEndian.Uint32(b))
	if n < 0 {
		return 0, 0, false, nil, corruptf("RowData length %d is negative", n)
	}
	if int64(n) > int64(len(b)-4) {
		return 0, 0, false, nil, truncated("RowData", int(n), len(b)-4)
	}
	row := b[4 : 4+int(n)]
	// BinaryRowData sizes are whole 8-byte words (null bits and fixed
	// slots, variable parts padded); hashByWords reads 4-byte words.
	if n%4 != 0 {
		return 0, 0, false, nil, corruptf("RowData of %d bytes is not whole words", n)
	}
	var v any
	if want {
		v = append([]byte(nil), row...)
	}
	return 4 + int(n), BinaryRowHash(row), false, v, nil
}

// encode takes the BinaryRowData bytes in hex: the row layout depends on the
// table's logical types, which the key serializer snapshot holds but this
// package does not decode.
func (rowDataField) encode(dst []byte, s string) ([]byte, error) {
	row, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "0x"))
	if err != nil || len(row)%4 != 0 {
		return dst, invalidf("spell a RowData key as the hex of its BinaryRowData bytes (whole 4-byte words)")
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(row)))
	return append(dst, row...), nil
}

func (rowDataField) encodeNull(dst []byte) ([]byte, error) { return notNull(dst, "RowData") }

// BinaryRowHash is BinaryRowData.hashCode: MurmurHashUtils.hashBytesByWords
// with seed 42 over the row bytes (len(row) a multiple of 4). MemorySegment
// reads the words in native order: little-endian on every platform Flink
// ships for (x86-64, aarch64).
func BinaryRowHash(row []byte) int32 {
	h := uint32(42)
	for i := 0; i+4 <= len(row); i += 4 {
		k := binary.LittleEndian.Uint32(row[i:])
		k *= 0xcc9e2d51
		k = bits.RotateLeft32(k, 15)
		k *= 0x1b873593
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	h ^= uint32(len(row))
	return int32(bitMix(h))
}
