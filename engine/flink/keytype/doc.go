// Package keytype reads the keys of Flink keyed state: it finds where a key
// serialized by one of Flink's key serializers ends, decodes it, computes
// the Java hashCode() of the object Flink would deserialize from it, and
// maps that hash to Flink's key group. Rebucketing a savepoint to a new max
// parallelism M means giving every entry the key group KeyGroup(hash, M),
// so this package must agree with the JVM bit for bit.
//
// Every encoding and hash below was read from the Flink 2.3.0 sources
// (flink-core, flink-core-api, flink-runtime, flink-table-common,
// flink-table-runtime) and is checked by the tests against Flink itself:
// testdata/java_vectors.tsv is printed by testdata/javagen/KeyVectors.java,
// which serializes sample keys with Flink's own serializers, deserializes
// them, and prints hashCode() and KeyGroupRangeAssignment's key groups at
// max parallelism 8, 128, 256 and 32768; and every key of the real
// canonical savepoints in testdata/probe-keyed hashes to the key group its
// prefix says. All integers are big-endian unless stated.
//
// # Key groups (KeyGroupRangeAssignment, MathUtils)
//
//	keyGroup      = murmurHash(key.hashCode()) % maxParallelism
//	murmurHash(c) = one murmur3_32 block round on c (c1 0xcc9e2d51, c2 0x1b873593,
//	                rotl 15, rotl 13, *5 + 0xe6546b64), then ^= 4, then fmix32,
//	                then the absolute value (Integer.MIN_VALUE -> 0)
//	operator      = keyGroup * parallelism / maxParallelism
//	range of op i = [ceil(i*M/p), floor(((i+1)*M - 1)/p)]
//
// Example: "k42" has hashCode 104489 and lands in key group 7 at M=8, 71 at
// 128, 199 at 256, 12487 at 32768.
//
// In keyed state each key is stored as a composite key
// (CompositeKeySerializationUtils):
//
//	keyGroup prefix | key [| key length] | namespace [| ns length] [| map user key]
//
// The prefix is the key group in 1 byte when M <= 128, else 2 bytes
// (PrefixBytes); at M=256 "k42" starts 00 c7. The length suffixes appear
// only when both the key and the namespace serializer are variable-sized
// (getLength() < 0, AmbiguousKeyPossible); they are the length in as many
// little-endian bytes as it needs, at least one (LengthSuffixLen). The
// usual VoidNamespace is one 00 byte but reports getLength() 0, so String
// keys with VoidNamespace carry no suffix. Timers are
// prefix | i64 timestamp (sign bit flipped) | key | namespace.
//
// # Scalar keys (org.apache.flink.api.common.typeutils.base)
//
// Snapshot classes are <Type>Serializer$<Type>SerializerSnapshot in that
// package. Lengths are TypeSerializer.getLength (FixedLen).
//
//	Long       8 bytes (writeLong)   hashCode (int)(v ^ (v >>> 32))
//	           9999 -> 00 00 00 00 00 00 27 0f, hash 9999; -1 -> ff..ff, hash 0
//	Integer    4 bytes (writeInt)    hashCode v;  -42 -> ff ff ff d6
//	Short      2 bytes               hashCode (int) v
//	Byte       1 byte                hashCode (int) v (signed)
//	Boolean    1 byte, 01 / 00       hashCode 1231 / 1237; any non-zero byte reads as true
//	Character  2 bytes, UTF-16 unit  hashCode the unit (unsigned); 'é' -> 00 e9, hash 233
//	Double     8 bytes               writeDouble writes doubleToLongBits, so every NaN is
//	                                 stored as 7f f8 00 00 00 00 00 00; hashCode
//	                                 (int)(bits ^ (bits >>> 32)) of doubleToLongBits, which
//	                                 also folds any other NaN bits to the canonical one.
//	                                 -0.0 (80 00..) hashes -2147483648, 0.0 hashes 0.
//	Float      4 bytes               as Double with floatToIntBits; NaN 7f c0 00 00,
//	                                 hashCode = the bits
//
// # String (StringSerializer -> org.apache.flink.types.StringValue)
//
// writeString writes length+1 (0 for null) as a varint, then each UTF-16
// code unit as a varint. The varint holds 7 bits a byte, low bits first;
// a set high bit means another byte follows. readString accepts over-long
// forms, wraps the shift as Java does, and casts each unit to char (16 bits).
// hashCode is Java's s[0]*31^(n-1) + ... + s[n-1] over the UTF-16 units.
//
//	""                 01
//	null               00 (never a whole key; a null Tuple field, hash 0)
//	"k42"              04 6b 34 32                       hash 104489
//	"été"              04 e9 01 74 e9 01                 (é = 0xe9 = e9 01)
//	"😀"               03 bd b0 03 80 bc 03              (surrogates d83d de00)
//	"\uffff"           02 ff ff 03
//	200 x "x"          c9 01 78 78 ...                   (length+1 = 201)
//
// Decode returns a Go string; a lone surrogate (legal in Java) becomes
// U+FFFD there, while HashCode still counts the original unit.
//
// # Tuples (TupleSerializer, snapshot TupleSerializerSnapshot)
//
// Tuple1..Tuple25: the field serializers' bytes back to back, no header.
// TupleN.hashCode is result = h(f0); result = 31*result + h(fi) for the next
// fields, a null field counting 0 (only String fields can be null; the other
// serializers throw). The snapshot is composite: its outer body is the tuple
// class name (writeUTF); a user subclass of TupleN may override hashCode and
// is refused when the caller passes that body (Spec.Outer). getLength is
// the sum of the fields' lengths when all are fixed, else -1.
//
//	Tuple2<String,Long>("k1", 1)   03 6b 31 | 00 00 00 00 00 00 00 01
//	                               hash 31*3366 + 1 = 104347, key group 2 at 8
//	Tuple2<String,Long>(null, 5)   00 | 00 00 00 00 00 00 00 05, hash 5
//
// # Row (RowSerializer$RowSerializerSnapshot)
//
// A null mask, then the non-null fields. The mask has 2 row-kind bits (kind
// byte bit 0, bit 1) then one bit per field (1 = null), packed from the high
// bit of each byte, ceil((2+n)/8) bytes; snapshots of outer version < 3
// (Flink before 1.11) have no row-kind bits, version 3 has them, version 4
// stores the choice as a boolean outer body. Row.hashCode is
// 31*kind + deepHashCodeArray(fields), where the array hash starts at 1 and
// takes 31*h for each field with h = 0 for null and 31 + hashCode otherwise
// (RowUtils.deepHashCodeInternal goes through Arrays.deepHashCode of a
// one-element array).
//
//	Row.of("a", 1L)       00 | 02 61 | 00 00 00 00 00 00 00 01   hash 4961
//	Row.of(null, 2L)      20 | 00 00 00 00 00 00 00 02            hash 994
//	DELETE ("x", 3L)      c0 | 02 78 | 00 .. 03                   hash 5769
//
// # Table/SQL keys (RowDataSerializer, BinaryRowDataSerializer)
//
// SQL operators key by BinaryRowData. The serializer writes i32 size, then
// the row's bytes: a header byte (row kind) and null bits padded to 8-byte
// words, an 8-byte slot per field, and variable-length parts padded to
// words. BinaryRowData.hashCode is MurmurHashUtils.hashBytesByWords: murmur3_32
// with seed 42 over the row as 4-byte words read in native (little-endian)
// order, finalised with the length; it does not depend on the field types,
// so no type information is needed. Decode returns the row bytes.
//
//	(INT 42)              00 00 00 10 | 00 00 00 00 00 00 00 00 2a 00 00 00 00 00 00 00
//	                      hash 907821237
//	() (global aggregate) 00 00 00 08 | 00 00 00 00 00 00 00 00  hash -1670924195
//
// # Serializer snapshots (ReadKeySpec, ReadSerializerSnapshot)
//
// The keyed-state header (KeyedBackendSerializationProxy) starts with i32
// version 6, a bool compression flag, then the key serializer snapshot as
// TypeSerializerSnapshotSerializationUtil writes it: i32 2, UTF class, i32
// snapshot version, then a body with no length prefix. Scalar snapshots
// (SimpleTypeSerializerSnapshot) have an empty body; BinaryRowData's is an
// i32 field count; RowData's holds Java-serialized logical types, which
// this package does not delimit (the key serializer is all it needs from
// the header). A composite snapshot (Tuple, Row; version 3) is i32 911108,
// i32 outer version, the outer body (Tuple: UTF tuple class; Row v4: bool
// supportsRowKind), i32 1333245, i32 1, i32 n, then n nested snapshots
// without the leading i32 2:
//
//	00000006 00 | 00000002 | 0054 "org...StringSerializer$StringSerializerSnapshot" | 00000003
//	          ^ compression  ^ proxy version                                         ^ snapshot version
//
// # Refused
//
// POJO and Kryo keys hash with user code; Avro and Scala keys would need
// ports of their hash functions; arrays and enums hash by identity (Flink
// refuses them as keys); anything else unknown. ForSpec returns an error
// wrapping ErrUnsupportedKey (and snapshotfmt.ErrUnsupported) that names
// the class. Damaged key bytes give errors wrapping snapshotfmt.ErrCorrupt;
// bad command-line spellings, snapshotfmt.ErrInvalidArgument.
//
// # Command-line spellings (Encode)
//
// Scalars as Java prints them ("-7", "true", "NaN", "-Infinity", "1.0E300",
// one character for Character). Tuples and Rows as a JSON array of their
// fields, nested composites as nested arrays, null for a null field
// (["k1", 1], [null, 2], [["a", 7], 9]). RowData as the hex of the
// BinaryRowData bytes. ForName takes the key type as a user types it
// (string, long, int, ..., tuple<string,long>, row<...>, rowdata).
package keytype
