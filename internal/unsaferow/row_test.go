package unsaferow

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

const richSchema = `{"type":"struct","fields":[
 {"name":"s","type":"string","nullable":true,"metadata":{}},
 {"name":"i","type":"integer","nullable":true,"metadata":{}},
 {"name":"l","type":"long","nullable":false,"metadata":{}},
 {"name":"d","type":"double","nullable":true,"metadata":{}},
 {"name":"b","type":"boolean","nullable":true,"metadata":{}},
 {"name":"bin","type":"binary","nullable":true,"metadata":{}},
 {"name":"dt","type":"date","nullable":true,"metadata":{}},
 {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"dc","type":"decimal(10,2)","nullable":true,"metadata":{}},
 {"name":"dw","type":"decimal(38,5)","nullable":true,"metadata":{}},
 {"name":"st","type":{"type":"struct","fields":[{"name":"a","type":"string","nullable":true,"metadata":{}},{"name":"n","type":"short","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
 {"name":"f","type":"float","nullable":true,"metadata":{}},
 {"name":"y","type":"byte","nullable":true,"metadata":{}}]}`

func mustSchema(t testing.TB, js string) *Type {
	t.Helper()
	s, err := ParseSchema([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Bytes measured on real Spark 4.3 state (research doc §3): key "k0" of a
// string-keyed aggregation and a count() value.
func TestGoldenSparkBytes(t *testing.T) {
	key := mustSchema(t, `{"type":"struct","fields":[{"name":"k","type":"string","nullable":true,"metadata":{}}]}`)
	got, err := Encode(key, []any{"k0"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "0000000000000000" + "0200000010000000" + "6b30000000000000"; hex.EncodeToString(got) != want {
		t.Fatalf("k0 = %x, want %s", got, want)
	}
	val := mustSchema(t, `{"type":"struct","fields":[{"name":"count","type":"long","nullable":false,"metadata":{}}]}`)
	got, _ = Encode(val, []any{int64(7)})
	if want := "0000000000000000" + "0700000000000000"; hex.EncodeToString(got) != want {
		t.Fatalf("count 7 = %x, want %s", got, want)
	}
	vals, err := Decode(key, got[:0:0])
	if err == nil {
		t.Fatalf("decoded an empty row: %v", vals)
	}
}

func richValues() [][]any {
	big38, _ := new(big.Int).SetString("-12345678901234567890123456789012345678", 10)
	return [][]any{
		{"héllo 漢字", int32(-5), int64(math.MinInt64), 2.5, true, []byte{0, 1, 2}, int32(19000), int64(1700000000123456),
			DecimalValue{big.NewInt(-12345), 2}, DecimalValue{big38, 5}, []any{"x", int16(-3)}, float32(1.5), int8(-128)},
		{"", nil, int64(0), nil, false, []byte{}, nil, nil, nil, nil, []any{nil, nil}, nil, nil},
		{nil, int32(math.MaxInt32), int64(math.MaxInt64), math.Inf(-1), nil, nil, int32(-1), int64(-1),
			DecimalValue{big.NewInt(99999999), 2}, DecimalValue{big.NewInt(0), 5}, nil, float32(-0.0), int8(127)},
	}
}

func TestRoundTripRich(t *testing.T) {
	s := mustSchema(t, richSchema)
	for i, vals := range richValues() {
		b, err := Encode(s, vals)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if len(b)%8 != 0 {
			t.Fatalf("row %d: %d bytes, not word aligned", i, len(b))
		}
		got, err := Decode(s, b)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if !reflect.DeepEqual(normal(got), normal(vals)) {
			t.Fatalf("row %d:\n got %v\nwant %v", i, got, vals)
		}
		again, _ := Encode(s, got)
		if !bytes.Equal(again, b) {
			t.Fatalf("row %d: re-encoding differs", i)
		}
	}
}

// normal makes decimals comparable by value.
func normal(v []any) []any {
	out := make([]any, len(v))
	for i, x := range v {
		switch y := x.(type) {
		case DecimalValue:
			out[i] = y.String()
		case []any:
			out[i] = normal(y)
		default:
			out[i] = x
		}
	}
	return out
}

func TestNonCompactDecimalLayout(t *testing.T) {
	s := mustSchema(t, `{"type":"struct","fields":[{"name":"d","type":"decimal(20,0)","nullable":true,"metadata":{}}]}`)
	b, _ := Encode(s, []any{DecimalValue{big.NewInt(-1), 0}})
	// bitset, slot (offset 16, size 1), 16 reserved bytes holding 0xff.
	if want := "0000000000000000" + "0100000010000000" + "ff00000000000000" + "0000000000000000"; hex.EncodeToString(b) != want {
		t.Fatalf("got %x want %s", b, want)
	}
	b, _ = Encode(s, []any{nil})
	if want := "0100000000000000" + "0000000010000000" + strings.Repeat("00", 16); hex.EncodeToString(b) != want {
		t.Fatalf("null: got %x want %s", b, want)
	}
}

func TestToTwosMatchesJava(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		want string
	}{{0, "00"}, {1, "01"}, {127, "7f"}, {128, "0080"}, {-1, "ff"}, {-128, "80"}, {-129, "ff7f"}, {255, "00ff"}, {-256, "ff00"}} {
		got := ToTwos(big.NewInt(tc.v))
		if hex.EncodeToString(got) != tc.want {
			t.Errorf("ToTwos(%d) = %x, want %s", tc.v, got, tc.want)
		}
		if back := fromTwos(got); back.Int64() != tc.v {
			t.Errorf("fromTwos(%x) = %v", got, back)
		}
	}
}

func TestUnsupportedTypes(t *testing.T) {
	for _, js := range []string{
		`{"type":"struct","fields":[{"name":"a","type":{"type":"array","elementType":"integer","containsNull":true},"nullable":true,"metadata":{}}]}`,
		`{"type":"struct","fields":[{"name":"m","type":{"type":"map","keyType":"string","valueType":"integer","valueContainsNull":true},"nullable":true,"metadata":{}}]}`,
		`{"type":"struct","fields":[{"name":"v","type":"variant","nullable":true,"metadata":{}}]}`,
		`{"type":"struct","fields":[{"name":"c","type":"string","nullable":true,"metadata":{"__COLLATIONS":{"c":"spark.UTF8_LCASE"}}}]}`,
	} {
		if _, err := ParseSchema([]byte(js)); !errors.Is(err, snapshotfmt.ErrUnsupported) {
			t.Errorf("%s: err %v, want ErrUnsupported", js, err)
		}
	}
	for _, js := range []string{`{`, `"integer"`, `{"type":"struct"}`, `{"type":"struct","fields":[{"name":"d","type":"decimal(50,2)"}]}`} {
		if _, err := ParseSchema([]byte(js)); !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", js, err)
		}
	}
}

func TestSchemaJSONRoundTrip(t *testing.T) {
	s := mustSchema(t, richSchema)
	s2 := mustSchema(t, s.JSON())
	if !reflect.DeepEqual(s, s2) {
		t.Fatalf("JSON round trip changed the schema: %s", s.JSON())
	}
	if got := s.Fields[10].Type.String(); got != "struct<a:string,n:smallint>" {
		t.Fatalf("String() = %s", got)
	}
}

func TestDamagedRows(t *testing.T) {
	s := mustSchema(t, richSchema)
	good, _ := Encode(s, richValues()[0])
	slot0 := BitsetBytes(13)
	cases := map[string][]byte{
		"short":           good[:20],
		"offset too far":  func() []byte { b := bytes.Clone(good); b[slot0+4] = 0xff; return b }(),
		"size too big":    func() []byte { b := bytes.Clone(good); b[slot0+2] = 0x7f; return b }(),
		"offset in slots": func() []byte { b := bytes.Clone(good); b[slot0+4] = 8; return b }(),
		"truncated var":   good[:len(good)-8],
	}
	for name, b := range cases {
		if _, err := Decode(s, b); !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	s := mustSchema(f, richSchema)
	for _, v := range richValues() {
		b, _ := Encode(s, v)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		vals, err := Decode(s, b)
		if err != nil {
			if !errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// What decodes re-encodes canonically and decodes to the same values.
		enc, err := Encode(s, vals)
		if err != nil {
			t.Fatalf("re-encode %v: %v", vals, err)
		}
		again, err := Decode(s, enc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normalNaN(normal(again)), normalNaN(normal(vals))) {
			t.Fatalf("re-decode differs:\n%v\n%v", again, vals)
		}
	})
}

// normalNaN lets NaN equal NaN.
func normalNaN(v []any) []any {
	for i, x := range v {
		switch y := x.(type) {
		case float64:
			if y != y {
				v[i] = "NaN"
			}
		case float32:
			if y != y {
				v[i] = "NaN"
			}
		case []any:
			normalNaN(y)
		}
	}
	return v
}
