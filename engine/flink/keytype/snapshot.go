package keytype

import (
	"encoding/binary"
	"fmt"
)

// Magic numbers of CompositeTypeSerializerSnapshot and
// NestedSerializersSnapshotDelegate.
const (
	compositeMagic = 911108
	nestedMagic    = 1333245
)

// ReadKeySpec reads the key serializer snapshot from the start of a
// keyed-state stream (KeyedBackendSerializationProxy): i32 version (6 in
// every Flink since 1.16, the only one Flink 2.x reads), bool compression
// (Snappy-framed key groups), then the snapshot as ReadSerializerSnapshot
// reads it.
func ReadKeySpec(header []byte) (spec Spec, compressed bool, err error) {
	if len(header) < 5 {
		return Spec{}, false, corruptf("keyed-state header truncated: %d bytes", len(header))
	}
	if v := int32(binary.BigEndian.Uint32(header)); v != 6 {
		return Spec{}, false, fmt.Errorf("%w: keyed-state header version %d (Flink 2.x writes and reads 6)", ErrUnsupportedKey, v)
	}
	switch header[4] {
	case 0, 1:
		compressed = header[4] == 1
	default:
		return Spec{}, false, corruptf("keyed-state compression flag %d", header[4])
	}
	spec, _, err = ReadSerializerSnapshot(header[5:])
	return spec, compressed, err
}

// ReadSerializerSnapshot reads what TypeSerializerSnapshotSerializationUtil
// .writeSerializerSnapshot writes at the start of b: i32 2, UTF snapshot
// class, i32 snapshot version, then the snapshot's body, which has no length
// prefix. It returns the spec and the bytes read, or n = -1 when the spec is
// complete but its body cannot be delimited (RowData, whose body holds Java
// serialized logical types, and classes this package does not know: ForSpec
// refuses those by name). A composite whose fields cannot be delimited gives
// an error wrapping ErrUnsupportedKey.
func ReadSerializerSnapshot(b []byte) (Spec, int, error) {
	if len(b) < 4 {
		return Spec{}, 0, corruptf("serializer snapshot truncated")
	}
	if v := int32(binary.BigEndian.Uint32(b)); v != 2 {
		return Spec{}, 0, corruptf("serializer snapshot proxy version %d, want 2", v)
	}
	return readVersionedSnapshot(b, 4, 0)
}

// readVersionedSnapshot reads TypeSerializerSnapshot.writeVersionedSnapshot
// at b[pos:]: UTF class, i32 version, body. It returns the position after
// the body, or -1 when the body cannot be delimited.
func readVersionedSnapshot(b []byte, pos, depth int) (Spec, int, error) {
	if depth > maxDepth {
		return Spec{}, 0, fmt.Errorf("%w: key serializer nested deeper than %d levels", ErrUnsupportedKey, maxDepth)
	}
	class, err := readUTF(b[pos:])
	if err != nil {
		return Spec{}, 0, fmt.Errorf("serializer snapshot class: %w", err)
	}
	pos += 2 + len(class)
	version, pos, err := readI32(b, pos, "serializer snapshot version")
	if err != nil {
		return Spec{}, 0, err
	}
	s := Spec{Class: class}
	switch class {
	case ClassString, ClassLong, ClassInt, ClassShort, ClassByte, ClassBoolean, ClassChar, ClassDouble, ClassFloat:
		return s, pos, nil // SimpleTypeSerializerSnapshot writes no body
	case ClassBinaryRowData:
		_, pos, err = readI32(b, pos, "BinaryRowData field count")
		return s, pos, err
	case ClassTuple, ClassRow:
		return readComposite(b, pos, depth, s, version)
	}
	return s, -1, nil
}

func readComposite(b []byte, pos, depth int, s Spec, version int32) (Spec, int, error) {
	if version <= 2 {
		// CompositeTypeSerializerSnapshot's legacy layout (no magic numbers)
		// comes from Flink before 1.8; Flink 2.x cannot read such state.
		return s, 0, fmt.Errorf("%w: %s snapshot version %d (written before Flink 1.8)", ErrUnsupportedKey, s.Class, version)
	}
	magic, pos, err := readI32(b, pos, "composite snapshot magic")
	if err != nil {
		return s, 0, err
	}
	if magic != compositeMagic {
		return s, 0, corruptf("%s: composite snapshot magic %d, want %d", shortClass(s.Class), magic, compositeMagic)
	}
	outerVersion, pos, err := readI32(b, pos, "outer snapshot version")
	if err != nil {
		return s, 0, err
	}
	s.OuterVersion = int(outerVersion)
	start := pos
	switch s.Class {
	case ClassTuple: // writeUTF(tuple class name)
		name, err := readUTF(b[pos:])
		if err != nil {
			return s, 0, fmt.Errorf("tuple class name: %w", err)
		}
		pos += 2 + len(name)
	case ClassRow: // version 4+: writeBoolean(supportsRowKind); 3 and below: nothing
		if outerVersion >= 4 {
			if pos >= len(b) {
				return s, 0, corruptf("row snapshot: supportsRowKind missing")
			}
			pos++
		}
	}
	s.Outer = append([]byte{}, b[start:pos]...)
	magic, pos, err = readI32(b, pos, "nested snapshots magic")
	if err != nil {
		return s, 0, err
	}
	if magic != nestedMagic {
		return s, 0, corruptf("%s: nested snapshots magic %d, want %d", shortClass(s.Class), magic, nestedMagic)
	}
	if v, p, err := readI32(b, pos, "nested snapshots version"); err != nil {
		return s, 0, err
	} else if v != 1 {
		return s, 0, corruptf("nested snapshots version %d, want 1", v)
	} else {
		pos = p
	}
	n, pos, err := readI32(b, pos, "nested snapshot count")
	if err != nil {
		return s, 0, err
	}
	// Every nested snapshot takes at least 6 bytes: refuse absurd counts
	// before allocating.
	if n < 0 || int64(n)*6 > int64(len(b)-pos) {
		return s, 0, corruptf("%s: %d nested snapshots in %d bytes", shortClass(s.Class), n, len(b)-pos)
	}
	s.Nested = make([]Spec, 0, n)
	for i := 0; i < int(n); i++ {
		ns, next, err := readVersionedSnapshot(b, pos, depth+1)
		if err != nil {
			return s, 0, fmt.Errorf("field %d of %s: %w", i, shortClass(s.Class), err)
		}
		if next < 0 {
			return s, 0, fmt.Errorf("field %d of %s: %w", i, shortClass(s.Class), unsupported(ns.Class))
		}
		s.Nested = append(s.Nested, ns)
		pos = next
	}
	return s, pos, nil
}

func readI32(b []byte, pos int, what string) (int32, int, error) {
	if pos < 0 || pos+4 > len(b) {
		return 0, 0, corruptf("%s truncated", what)
	}
	return int32(binary.BigEndian.Uint32(b[pos:])), pos + 4, nil
}
