package keytype

import (
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

func mustCodec(t testing.TB, class string, nested ...string) Codec {
	t.Helper()
	c, err := ForSerializer(class, nested)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The research's real-savepoint examples: "k42" is in key group 7 of 8 and
// 199 of 256 (prefix 00c7); Long 9999 in key group 2 of 8.
func TestResearchExamples(t *testing.T) {
	s := mustCodec(t, ClassString)
	h, err := s.HashCode(unhex(t, "046b3432"))
	if err != nil || h != 104489 || StringHashCode("k42") != 104489 {
		t.Fatalf("k42 hash %d, %v", h, err)
	}
	if KeyGroup(h, 8) != 7 || KeyGroup(h, 256) != 199 {
		t.Fatalf("k42 key groups %d %d", KeyGroup(h, 8), KeyGroup(h, 256))
	}
	l := mustCodec(t, ClassLong)
	h, err = l.HashCode(unhex(t, "000000000000270f"))
	if err != nil || h != 9999 || KeyGroup(h, 8) != 2 {
		t.Fatalf("9999: hash %d kg %d, %v", h, KeyGroup(h, 8), err)
	}
}

func TestMurmurHashNeverNegative(t *testing.T) {
	for _, c := range []int32{0, 1, -1, math.MaxInt32, math.MinInt32, 104489, -104489} {
		if m := MurmurHash(c); m < 0 {
			t.Errorf("MurmurHash(%d) = %d", c, m)
		}
	}
}

func TestKeyGroupRanges(t *testing.T) {
	// The research's example: M=128, p=40.
	if s, e := KeyGroupRange(0, 128, 40); s != 0 || e != 3 {
		t.Errorf("op 0 = %d..%d, want 0..3", s, e)
	}
	if s, e := KeyGroupRange(39, 128, 40); s != 125 || e != 127 {
		t.Errorf("op 39 = %d..%d, want 125..127", s, e)
	}
	// The ranges of all operators tile 0..M-1 and OperatorIndex agrees with
	// them, as Flink's StateAssignmentOperation relies on.
	for _, m := range []int{1, 5, 8, 128, 129, 256, 1000, 32768} {
		for _, p := range []int{1, 2, 3, 5, 7, 40, 128} {
			if p > m {
				continue
			}
			next := 0
			for op := 0; op < p; op++ {
				s, e := KeyGroupRange(op, m, p)
				if s != next || e < s {
					t.Fatalf("M=%d p=%d op %d: range %d..%d, want start %d", m, p, op, s, e, next)
				}
				for _, kg := range []int{s, e} {
					if got := OperatorIndex(kg, m, p); got != op {
						t.Fatalf("M=%d p=%d: OperatorIndex(%d) = %d, range says %d", m, p, kg, got, op)
					}
				}
				next = e + 1
			}
			if next != m {
				t.Fatalf("M=%d p=%d: ranges end at %d", m, p, next)
			}
		}
	}
}

func TestPrefixBytes(t *testing.T) {
	for m, want := range map[int]int{1: 1, 8: 1, 128: 1, 129: 2, 256: 2, 32768: 2} {
		if got := PrefixBytes(m); got != want {
			t.Errorf("PrefixBytes(%d) = %d, want %d", m, got, want)
		}
	}
}

func TestUnsupportedKeys(t *testing.T) {
	cases := []struct {
		spec Spec
		says string
	}{
		{Spec{Class: "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"}, "POJO"},
		{Spec{Class: "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"}, "Kryo"},
		{Spec{Class: "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot"}, "Avro"},
		{Spec{Class: "org.apache.flink.api.scala.typeutils.ScalaCaseClassSerializerSnapshot"}, "Scala"},
		{Spec{Class: "org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot"}, "arrays"},
		{Spec{Class: "org.apache.flink.api.common.typeutils.base.EnumSerializer$EnumSerializerSnapshot"}, "enums"},
		{Spec{Class: "com.example.MySerializerSnapshot"}, "com.example.MySerializerSnapshot"},
		{Spec{Class: ""}, "no key serializer"},
		{Spec{Class: ClassTuple}, "1 to 25"},
		{Spec{Class: ClassTuple, Nested: make([]Spec, 26)}, "1 to 25"},
		{Spec{Class: ClassTuple, Nested: []Spec{{Class: ClassString}, {Class: "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"}}}, "field 1"},
		{Spec{Class: ClassTuple, Outer: utf("com.example.MyKey"), Nested: []Spec{{Class: ClassString}, {Class: ClassLong}}}, "com.example.MyKey"},
		{Spec{Class: ClassRow}, "no fields"},
	}
	for _, c := range cases {
		_, err := ForSpec(c.spec)
		if !errors.Is(err, ErrUnsupportedKey) || !errors.Is(err, snapshotfmt.ErrUnsupported) {
			t.Errorf("%+v: err %v, want ErrUnsupportedKey", c.spec.Class, err)
			continue
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %q does not say %q", c.spec.Class, err, c.says)
		}
	}
	// Flink's own tuple class named in the outer snapshot is fine.
	if _, err := ForSpec(Spec{Class: ClassTuple, OuterVersion: 2, Outer: utf("org.apache.flink.api.java.tuple.Tuple2"),
		Nested: []Spec{{Class: ClassString}, {Class: ClassLong}}}); err != nil {
		t.Errorf("Tuple2 with its class: %v", err)
	}
	// A damaged outer snapshot is corrupt, not unsupported.
	if _, err := ForSpec(Spec{Class: ClassTuple, Outer: []byte{0, 9, 'x'}, Nested: []Spec{{Class: ClassString}}}); !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Errorf("truncated tuple class name: %v", err)
	}
}

func utf(s string) []byte { return append([]byte{byte(len(s) >> 8), byte(len(s))}, s...) }

// Every strict prefix of a valid key is truncated, so Len must fail with
// ErrCorrupt on it; the vectors give real keys of every type.
func TestTruncatedKeysAreCorrupt(t *testing.T) {
	for _, v := range loadVectors(t) {
		for cut := 0; cut < len(v.key); cut++ {
			n, err := v.codec.Len(v.key[:cut])
			if !errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Errorf("%s %x cut to %d: Len = %d, %v; want ErrCorrupt", v.label, v.key, cut, n, err)
			}
			if _, err := v.codec.HashCode(v.key[:cut]); !errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Errorf("%s %x cut to %d: HashCode err %v; want ErrCorrupt", v.label, v.key, cut, err)
			}
		}
		if _, err := v.codec.HashCode(append(append([]byte{}, v.key...), 0)); !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Errorf("%s %x with a trailing byte: HashCode err %v; want ErrCorrupt", v.label, v.key, err)
		}
	}
}

func TestCorruptKeys(t *testing.T) {
	s := mustCodec(t, ClassString)
	rd := mustCodec(t, ClassRowData)
	sl := mustCodec(t, ClassTuple, ClassString, ClassLong)
	cases := []struct {
		c   Codec
		key string
	}{
		{s, "00"},                    // the null String: never a key
		{s, "8000"},                  // an over-long length 0: readString subtracts 1 and fails
		{sl, "80000000000000000005"}, // the same in a tuple field, where a real null (00) is fine
		{s, "ffffffff0f"},            // length 2^32-1, minus one is negative in Java
		{s, "8080808080808080"},      // a length varint that never ends
		{s, "056162"},                // 4 chars announced, 2 present
		{s, "0381"},                  // a char varint cut short
		{rd, "80000000"},             // negative length
		{rd, "0000000300000000"},     // not whole words
		{rd, "0000001000000000"},     // announced 16, has 4
	}
	for _, c := range cases {
		key, _ := hex.DecodeString(c.key)
		if _, err := c.c.Len(key); !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Errorf("%s %s: Len err %v, want ErrCorrupt", c.c.Name(), c.key, err)
		}
		if _, err := c.c.Decode(key); !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Errorf("%s %s: Decode err %v, want ErrCorrupt", c.c.Name(), c.key, err)
		}
	}
	// Java's readString accepts over-long varints, so must we: 1 char "a"
	// with its length spelled in two bytes.
	if h, err := s.HashCode(unhex(t, "820061")); err != nil || h != 97 {
		t.Errorf("over-long length varint: %d, %v", h, err)
	}
	// A char varint above 16 bits is cast to char, as (char) c does.
	if h, err := s.HashCode(unhex(t, "02e18004")); err != nil || h != 0x61 {
		t.Errorf("char above 16 bits: %d, %v", h, err)
	}
}

func TestDecodeValues(t *testing.T) {
	cases := []struct {
		c    Codec
		key  string
		want any
	}{
		{mustCodec(t, ClassString), "04e90174e901", "été"},
		{mustCodec(t, ClassString), "01", ""},
		{mustCodec(t, ClassLong), "8000000000000000", int64(math.MinInt64)},
		{mustCodec(t, ClassInt), "ffffffd6", int32(-42)},
		{mustCodec(t, ClassShort), "8000", int16(-32768)},
		{mustCodec(t, ClassByte), "80", int8(-128)},
		{mustCodec(t, ClassBoolean), "01", true},
		{mustCodec(t, ClassChar), "00e9", uint16(0xe9)},
		{mustCodec(t, ClassDouble), "c002000000000000", -2.25},
		{mustCodec(t, ClassFloat), "c0100000", float32(-2.25)},
		{mustCodec(t, ClassTuple, ClassString, ClassLong), "036b310000000000000001", []any{"k1", int64(1)}},
		{mustCodec(t, ClassTuple, ClassString, ClassLong), "000000000000000005", []any{nil, int64(5)}},
		{mustCodec(t, ClassRow, ClassString, ClassLong), "200000000000000002", []any{nil, int64(2)}},
		{mustCodec(t, ClassRowData), "000000080000000000000000", []byte{0, 0, 0, 0, 0, 0, 0, 0}},
	}
	for _, c := range cases {
		got, err := c.c.Decode(unhex(t, c.key))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s: Decode = %#v, %v; want %#v", c.c.Name(), c.key, got, err, c.want)
		}
	}
}

// Double.hashCode and Float.hashCode go through doubleToLongBits and
// floatToIntBits, which fold every NaN into the canonical one. Flink never
// writes other NaNs (DataOutputSerializer uses the same), but bytes written
// by anything else must still hash as Java would.
func TestNaNPayloadHashesCanonical(t *testing.T) {
	d := mustCodec(t, ClassDouble)
	want, _ := d.HashCode(unhex(t, "7ff8000000000000"))
	for _, k := range []string{"7ff0000000000123", "fff8000000000000", "7fffffffffffffff"} {
		if h, err := d.HashCode(unhex(t, k)); err != nil || h != want {
			t.Errorf("Double NaN %s: %d, %v; want %d", k, h, err, want)
		}
	}
	f := mustCodec(t, ClassFloat)
	want, _ = f.HashCode(unhex(t, "7fc00000"))
	for _, k := range []string{"7f800001", "ffc00000", "7fffffff"} {
		if h, err := f.HashCode(unhex(t, k)); err != nil || h != want {
			t.Errorf("Float NaN %s: %d, %v; want %d", k, h, err, want)
		}
	}
	// Encode writes the canonical NaN, as Flink does, not Go's math.NaN().
	if b, _ := d.Encode("NaN"); hex.EncodeToString(b) != "7ff8000000000000" {
		t.Errorf("Encode(NaN) = %x", b)
	}
}

func TestNestedAndLegacyComposites(t *testing.T) {
	// Tuple2<Tuple2<String,Integer>,Long>: TupleN.hashCode of the inner
	// tuple is a field hash of the outer one.
	inner := Spec{Class: ClassTuple, Nested: []Spec{{Class: ClassString}, {Class: ClassInt}}}
	c, err := ForSpec(Spec{Class: ClassTuple, Nested: []Spec{inner, {Class: ClassLong}}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "Tuple2<Tuple2<String,Integer>,Long>" || c.FixedLen() != -1 {
		t.Errorf("name %q fixed %d", c.Name(), c.FixedLen())
	}
	key, err := c.Encode(`[["k1", 7], 9]`)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(key) != "036b3100000007"+"0000000000000009" {
		t.Fatalf("nested tuple bytes %x", key)
	}
	h, err := c.HashCode(key)
	innerHash := 31*StringHashCode("k1") + 7
	if err != nil || h != 31*innerHash+9 {
		t.Errorf("nested tuple hash %d, %v; want %d", h, err, 31*innerHash+9)
	}
	// Tuple of fixed fields is fixed (TupleSerializerBase.getLength).
	if f := mustCodec(t, ClassTuple, ClassInt, ClassLong).FixedLen(); f != 12 {
		t.Errorf("Tuple2<Integer,Long> FixedLen %d, want 12", f)
	}
	// A Row snapshot from before Flink 1.11 (outer version < 3) has no row
	// kind bits: the mask is only the null bits.
	legacy, err := ForSpec(Spec{Class: ClassRow, OuterVersion: 2, Outer: []byte{}, Nested: []Spec{{Class: ClassString}, {Class: ClassLong}}})
	if err != nil {
		t.Fatal(err)
	}
	modern := mustCodec(t, ClassRow, ClassString, ClassLong)
	lk, _ := legacy.Encode(`[null, 2]`)
	mk, _ := modern.Encode(`[null, 2]`)
	if hex.EncodeToString(lk) != "800000000000000002" || hex.EncodeToString(mk) != "200000000000000002" {
		t.Fatalf("legacy %x modern %x", lk, mk)
	}
	lh, err1 := legacy.HashCode(lk)
	mh, err2 := modern.HashCode(mk)
	if err1 != nil || err2 != nil || lh != mh {
		t.Errorf("legacy and modern rows of the same INSERT values hash %d, %d (%v %v)", lh, mh, err1, err2)
	}
	// Outer version 4 carries supportsRowKind as a boolean.
	if c, err := ForSpec(Spec{Class: ClassRow, OuterVersion: 4, Outer: []byte{0}, Nested: []Spec{{Class: ClassLong}}}); err != nil {
		t.Error(err)
	} else if k, _ := c.Encode(`[1]`); hex.EncodeToString(k) != "000000000000000001" {
		t.Errorf("row kind off: %x", k)
	}
}

func TestEncodeErrors(t *testing.T) {
	cases := []struct {
		c Codec
		s string
	}{
		{mustCodec(t, ClassLong), "12x"},
		{mustCodec(t, ClassLong), "9223372036854775808"},
		{mustCodec(t, ClassInt), "2147483648"},
		{mustCodec(t, ClassShort), "40000"},
		{mustCodec(t, ClassByte), "128"},
		{mustCodec(t, ClassBoolean), "yes"},
		{mustCodec(t, ClassChar), "ab"},
		{mustCodec(t, ClassChar), "😀"},
		{mustCodec(t, ClassChar), ""},
		{mustCodec(t, ClassDouble), "one"},
		{mustCodec(t, ClassString), "\xff"},
		{mustCodec(t, ClassTuple, ClassString, ClassLong), `["a"]`},
		{mustCodec(t, ClassTuple, ClassString, ClassLong), `a,1`},
		{mustCodec(t, ClassTuple, ClassString, ClassLong), `["a", null]`},
		{mustCodec(t, ClassRowData), "xyz"},
		{mustCodec(t, ClassRowData), "000000"},
	}
	for _, c := range cases {
		if b, err := c.c.Encode(c.s); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
			t.Errorf("%s Encode(%q) = %x, %v; want ErrInvalidArgument", c.c.Name(), c.s, b, err)
		}
	}
}

func TestCompositeHelpers(t *testing.T) {
	// The research's example: "k42" at max parallelism 256 has prefix 00c7.
	if p := AppendKeyGroupPrefix(nil, 199, 256); hex.EncodeToString(p) != "00c7" {
		t.Errorf("prefix %x", p)
	}
	if p := AppendKeyGroupPrefix(nil, 7, 8); hex.EncodeToString(p) != "07" {
		t.Errorf("prefix %x", p)
	}
	if kg, err := ReadKeyGroupPrefix(unhex(t, "7fff00"), 32768); err != nil || kg != 32767 {
		t.Errorf("ReadKeyGroupPrefix = %d, %v", kg, err)
	}
	if _, err := ReadKeyGroupPrefix(unhex(t, "00"), 129); !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Errorf("short prefix: %v", err)
	}
	for n, want := range map[int]string{0: "00", 5: "05", 255: "ff", 256: "0001", 70000: "701101"} {
		got := AppendLengthSuffix(nil, n)
		if hex.EncodeToString(got) != want || LengthSuffixLen(n) != len(got) {
			t.Errorf("length suffix of %d: %x (len %d), want %s", n, got, LengthSuffixLen(n), want)
		}
	}
	if !AmbiguousKeyPossible(-1, -1) || AmbiguousKeyPossible(-1, 0) || AmbiguousKeyPossible(8, -1) {
		t.Error("AmbiguousKeyPossible")
	}
}

func BenchmarkHashCode(b *testing.B) {
	for _, c := range []struct {
		codec Codec
		key   []byte
	}{
		{mustCodec(b, ClassString), []byte("\x0bkey-123456")},
		{mustCodec(b, ClassLong), unhex(b, "000000000000270f")},
		{mustCodec(b, ClassTuple, ClassString, ClassLong), unhex(b, "036b310000000000000001")},
		{mustCodec(b, ClassRowData), unhex(b, "0000001800000000000000006b310000000000820100000000000000")},
	} {
		b.Run(c.codec.Name(), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.key)))
			for b.Loop() {
				if _, err := c.codec.HashCode(c.key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestValidMaxParallelism(t *testing.T) {
	for m, want := range map[int]bool{-1: false, 0: false, 1: true, 128: true, 32768: true, 32769: false} {
		if ValidMaxParallelism(m) != want {
			t.Errorf("ValidMaxParallelism(%d) != %v", m, want)
		}
	}
}

func TestForName(t *testing.T) {
	for name, want := range map[string]string{
		"string":                        "String",
		"LONG":                          "Long",
		"int":                           "Integer",
		"Character":                     "Character",
		"rowdata":                       "RowData",
		"tuple<string,long>":            "Tuple2<String,Long>",
		"Tuple2<String, Long>":          "Tuple2<String,Long>",
		"tuple<tuple<string,int>,long>": "Tuple2<Tuple2<String,Integer>,Long>",
		"row<string,double>":            "Row<String,Double>",
	} {
		c, err := ForName(name)
		if err != nil || c.Name() != want {
			t.Errorf("ForName(%q) = %v, %v; want %s", name, c, err, want)
		}
	}
	for _, bad := range []string{"", "uuid", "tuple", "tuple<", "tuple<string", "tuple3<string,long>", "tuple<string>>", "row<>", "tuple<pojo>"} {
		if _, err := ForName(bad); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
			t.Errorf("ForName(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
}
