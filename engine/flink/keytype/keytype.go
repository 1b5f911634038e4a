package keytype

import (
	"fmt"
	"strings"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// ErrUnsupportedKey marks a key serializer whose bytes this package cannot
// turn into Java's hashCode() (POJO, Kryo, Avro, Scala, arrays, enums, or a
// class it does not know). It wraps snapshotfmt.ErrUnsupported, so commands
// map it to the "damaged or unsupported input" exit code.
var ErrUnsupportedKey error = unsupportedKeyError{}

type unsupportedKeyError struct{}

func (unsupportedKeyError) Error() string        { return "unsupported Flink key type" }
func (unsupportedKeyError) Is(target error) bool { return target == snapshotfmt.ErrUnsupported }

// supportedKeys is the advice every refusal ends with.
const supportedKeys = "rebucket rehashes keys of Flink's built-in String, Long, Integer, Short, Byte, Boolean, Character, Double and Float serializers, Tuples and Rows of them, and Table/SQL (RowData) keys"

// Codec handles one Flink key serializer's binary format. Codecs hold no
// state: one may be used by any number of goroutines.
type Codec interface {
	// Name is a short spelling of the type, e.g. "String", "Long",
	// "Tuple2<String,Long>".
	Name() string
	// Len is the length of the serialized key at the start of b (every
	// supported format is self-delimiting). Truncated or invalid bytes give
	// an error wrapping snapshotfmt.ErrCorrupt.
	Len(b []byte) (int, error)
	// HashCode is the Java hashCode() of the object Flink deserializes from
	// key, which must hold exactly one serialized key (trailing bytes are an
	// error).
	HashCode(key []byte) (int32, error)
	// FixedLen is TypeSerializer.getLength(): the serialized length if
	// fixed, else -1. Flink appends the key's length after it in composite
	// keys when both key and namespace are variable-length ("ambiguous key").
	FixedLen() int
	// Decode turns key (exactly one serialized key) into a Go value: string,
	// int64, int32, int16, int8, bool, uint16 (Character), float64, float32,
	// []any for Tuple and Row (nil for null fields), []byte for RowData (the
	// BinaryRowData bytes).
	Decode(key []byte) (any, error)
	// Encode parses a command-line spelling of a key into its serialized
	// bytes. Composite keys are spelled as a JSON array (["k1", 42]).
	// Spelling errors wrap snapshotfmt.ErrInvalidArgument.
	Encode(v string) ([]byte, error)
}

// Serializer snapshot class names as written in the keyed-state header
// (KeyedBackendSerializationProxy, TypeSerializerSnapshotSerializationUtil).
const (
	ClassString  = "org.apache.flink.api.common.typeutils.base.StringSerializer$StringSerializerSnapshot"
	ClassLong    = "org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"
	ClassInt     = "org.apache.flink.api.common.typeutils.base.IntSerializer$IntSerializerSnapshot"
	ClassShort   = "org.apache.flink.api.common.typeutils.base.ShortSerializer$ShortSerializerSnapshot"
	ClassByte    = "org.apache.flink.api.common.typeutils.base.ByteSerializer$ByteSerializerSnapshot"
	ClassBoolean = "org.apache.flink.api.common.typeutils.base.BooleanSerializer$BooleanSerializerSnapshot"
	ClassChar    = "org.apache.flink.api.common.typeutils.base.CharSerializer$CharSerializerSnapshot"
	ClassDouble  = "org.apache.flink.api.common.typeutils.base.DoubleSerializer$DoubleSerializerSnapshot"
	ClassFloat   = "org.apache.flink.api.common.typeutils.base.FloatSerializer$FloatSerializerSnapshot"
	// ClassTuple is a CompositeTypeSerializerSnapshot: its outer body is the
	// tuple class name (writeUTF), its nested snapshots the field serializers.
	ClassTuple = "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot"
	// ClassRow is a CompositeTypeSerializerSnapshot: outer version 4 writes a
	// boolean supportsRowKind; version 3 means true, below 3 false.
	ClassRow = "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot"
	// ClassRowData and ClassBinaryRowData are the Table/SQL key serializers
	// (keys are BinaryRowData; RowDataSerializer writes them through
	// BinaryRowDataSerializer). Their bodies hold logical types, not nested
	// snapshots this package needs: the hash does not depend on the types.
	ClassRowData       = "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"
	ClassBinaryRowData = "org.apache.flink.table.runtime.typeutils.BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot"
)

// Spec describes a key serializer snapshot as read from the keyed-state
// header. Class is required; the rest matters only for composite snapshots.
type Spec struct {
	// Class is the snapshot class name.
	Class string
	// OuterVersion and Outer are a CompositeTypeSerializerSnapshot's outer
	// snapshot version and body bytes (0 and nil when not known). A Tuple
	// without Outer is taken to be Flink's own TupleN; a Row without either
	// to carry its row kind (the format of every Flink since 1.11).
	OuterVersion int
	Outer        []byte
	// Nested are the nested serializer snapshots (Tuple and Row fields).
	Nested []Spec
}

// ForSerializer returns the codec for a key serializer snapshot class name,
// with the nested snapshot class names of a composite (Tuple, Row fields).
// Nested composites need ForSpec.
func ForSerializer(snapshotClass string, nested []string) (Codec, error) {
	s := Spec{Class: snapshotClass}
	for _, n := range nested {
		s.Nested = append(s.Nested, Spec{Class: n})
	}
	return ForSpec(s)
}

// ForSpec returns the codec for a key serializer snapshot. Anything it
// cannot hash exactly as Java does gives an error wrapping ErrUnsupportedKey
// that names the class.
func ForSpec(s Spec) (Codec, error) {
	f, err := fieldFor(s, 0)
	if err != nil {
		return nil, err
	}
	return keyCodec{f}, nil
}

// maxDepth bounds nesting of composite keys; real keys nest once or twice.
const maxDepth = 16

func fieldFor(s Spec, depth int) (field, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: key serializer nested deeper than %d levels", ErrUnsupportedKey, maxDepth)
	}
	switch s.Class {
	case ClassString:
		return stringField{}, nil
	case ClassLong:
		return longField{}, nil
	case ClassInt:
		return intField{}, nil
	case ClassShort:
		return shortField{}, nil
	case ClassByte:
		return byteField{}, nil
	case ClassBoolean:
		return boolField{}, nil
	case ClassChar:
		return charField{}, nil
	case ClassDouble:
		return doubleField{}, nil
	case ClassFloat:
		return floatField{}, nil
	case ClassRowData, ClassBinaryRowData:
		return rowDataField{}, nil
	case ClassTuple:
		return tupleFor(s, depth)
	case ClassRow:
		return rowFor(s, depth)
	}
	return nil, unsupported(s.Class)
}

func nestedFields(s Spec, depth int) ([]field, error) {
	fs := make([]field, 0, len(s.Nested))
	for i, n := range s.Nested {
		f, err := fieldFor(n, depth+1)
		if err != nil {
			return nil, fmt.Errorf("field %d of %s: %w", i, shortClass(s.Class), err)
		}
		fs = append(fs, f)
	}
	return fs, nil
}

func tupleFor(s Spec, depth int) (field, error) {
	n := len(s.Nested)
	if n < 1 || n > 25 {
		return nil, fmt.Errorf("%w: %s with %d fields (Flink tuples have 1 to 25)", ErrUnsupportedKey, s.Class, n)
	}
	if s.Outer != nil {
		name, err := readUTF(s.Outer)
		if err != nil {
			return nil, fmt.Errorf("tuple serializer snapshot: %w", err)
		}
		// A subclass of TupleN may override hashCode(): only Flink's own
		// classes have a hash this package knows.
		if want := fmt.Sprintf("org.apache.flink.api.java.tuple.Tuple%d", n); name != want {
			return nil, fmt.Errorf("%w: tuple class %s (only Flink's own %s; a subclass may override hashCode)", ErrUnsupportedKey, name, want)
		}
	}
	fs, err := nestedFields(s, depth)
	if err != nil {
		return nil, err
	}
	return tupleField{fields: fs}, nil
}

func rowFor(s Spec, depth int) (field, error) {
	rowKind := true
	if s.Outer != nil || s.OuterVersion > 0 {
		switch {
		case s.OuterVersion < 3:
			rowKind = false
		case s.OuterVersion == 3:
			rowKind = true
		default:
			if len(s.Outer) < 1 {
				return nil, corruptf("row serializer snapshot: outer body empty, want the supportsRowKind boolean")
			}
			rowKind = s.Outer[0] != 0
		}
	}
	if len(s.Nested) == 0 {
		return nil, fmt.Errorf("%w: %s with no fields", ErrUnsupportedKey, s.Class)
	}
	fs, err := nestedFields(s, depth)
	if err != nil {
		return nil, err
	}
	return rowField{fields: fs, rowKind: rowKind}, nil
}

// readUTF reads java.io.DataOutput.writeUTF's u16 length and bytes. Class
// names are ASCII, so modified UTF-8 and UTF-8 agree.
func readUTF(b []byte) (string, error) {
	if len(b) < 2 {
		return "", corruptf("UTF string truncated: %d bytes", len(b))
	}
	n := int(b[0])<<8 | int(b[1])
	if len(b) < 2+n {
		return "", corruptf("UTF string of %d bytes truncated to %d", n, len(b)-2)
	}
	return string(b[2 : 2+n]), nil
}

// unsupported explains why a known serializer is refused.
func unsupported(class string) error {
	why := "this serializer is not one whose bytes rebucket can hash like Java's hashCode()"
	switch {
	case class == "":
		why = "no key serializer class"
	case strings.Contains(class, "PojoSerializer"):
		why = "POJO keys hash with user code (their hashCode())"
	case strings.Contains(class, "Kryo"):
		why = "Kryo (generic) keys hash with user code"
	case strings.Contains(class, "Avro"):
		why = "Avro keys would need a port of Avro's hash functions"
	case strings.HasPrefix(class, "org.apache.flink.api.scala") || strings.Contains(class, "scala"):
		why = "Scala keys would need a port of Scala's hash functions"
	case strings.Contains(class, "Array"):
		why = "arrays hash by identity in Java; Flink refuses them as keys"
	case strings.Contains(class, "Enum"):
		why = "enums hash by identity in Java; Flink refuses them as keys"
	}
	return fmt.Errorf("%w: key serializer %s: %s; %s", ErrUnsupportedKey, class, why, supportedKeys)
}

func shortClass(c string) string {
	if i := strings.LastIndexByte(c, '.'); i >= 0 {
		c = c[i+1:]
	}
	return c
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: flink key: %s", snapshotfmt.ErrCorrupt, fmt.Sprintf(format, args...))
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", snapshotfmt.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// LenHash is Len and HashCode in one pass over b: the length of the key at
// the start of b and the Java hashCode of that key. Rewriting calls it once
// per entry, so it avoids reading each key twice.
func LenHash(c Codec, b []byte) (int, int32, error) {
	kc, ok := c.(keyCodec)
	if !ok {
		n, err := c.Len(b)
		if err != nil {
			return 0, 0, err
		}
		h, err := c.HashCode(b[:n])
		return n, h, err
	}
	n, h, null, _, err := kc.f.read(b, false)
	if err != nil {
		return 0, 0, err
	}
	if null {
		return 0, 0, corruptf("%s key is null (Flink never stores null keys)", kc.f.name())
	}
	return n, h, nil
}
