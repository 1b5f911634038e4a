package keytype

import (
	"errors"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// fuzzSpecs covers every codec kind, composites included.
var fuzzSpecs = []Spec{
	{Class: ClassString}, {Class: ClassLong}, {Class: ClassInt}, {Class: ClassShort},
	{Class: ClassByte}, {Class: ClassBoolean}, {Class: ClassChar}, {Class: ClassDouble},
	{Class: ClassFloat}, {Class: ClassRowData},
	{Class: ClassTuple, Nested: []Spec{{Class: ClassString}, {Class: ClassLong}}},
	{Class: ClassTuple, Nested: []Spec{{Class: ClassTuple, Nested: []Spec{{Class: ClassString}, {Class: ClassChar}}}, {Class: ClassDouble}}},
	{Class: ClassRow, Nested: []Spec{{Class: ClassString}, {Class: ClassLong}, {Class: ClassString}, {Class: ClassInt},
		{Class: ClassString}, {Class: ClassBoolean}, {Class: ClassString}, {Class: ClassFloat}, {Class: ClassString}}},
	{Class: ClassRow, OuterVersion: 2, Outer: []byte{}, Nested: []Spec{{Class: ClassString}, {Class: ClassLong}}},
}

func fuzzCodecs(t testing.TB) []Codec {
	cs := make([]Codec, len(fuzzSpecs))
	for i, s := range fuzzSpecs {
		c, err := ForSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	return cs
}

// FuzzKeyBytes: no input panics; Len stays inside the input; whatever Len
// accepts HashCode and Decode accept too, with the same length; every error
// is ErrCorrupt.
func FuzzKeyBytes(f *testing.F) {
	for _, v := range loadVectors(f) {
		f.Add(v.key)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	codecs := fuzzCodecs(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range codecs {
			n, err := c.Len(b)
			ln, lh, lerr := LenHash(c, b)
			if (err == nil) != (lerr == nil) || ln != n {
				t.Fatalf("%s: Len %d, %v but LenHash %d, %v", c.Name(), n, err, ln, lerr)
			}
			if err != nil {
				if !errors.Is(err, snapshotfmt.ErrCorrupt) {
					t.Fatalf("%s Len(%x): %v is not ErrCorrupt", c.Name(), b, err)
				}
				if _, err := c.HashCode(b); err == nil {
					t.Fatalf("%s: HashCode(%x) accepted what Len refused", c.Name(), b)
				}
				continue
			}
			if n <= 0 || n > len(b) {
				t.Fatalf("%s Len(%x) = %d out of bounds", c.Name(), b, n)
			}
			if c.FixedLen() >= 0 && n != c.FixedLen() {
				t.Fatalf("%s Len %d, fixed %d", c.Name(), n, c.FixedLen())
			}
			if h, err := c.HashCode(b[:n]); err != nil || h != lh {
				t.Fatalf("%s HashCode(%x) = %d, %v after Len %d; LenHash said %d", c.Name(), b[:n], h, err, n, lh)
			}
			if _, err := c.Decode(b[:n]); err != nil {
				t.Fatalf("%s Decode(%x): %v after Len %d", c.Name(), b[:n], err, n)
			}
			if n < len(b) {
				if _, err := c.HashCode(b); !errors.Is(err, snapshotfmt.ErrCorrupt) {
					t.Fatalf("%s HashCode with %d trailing bytes: %v", c.Name(), len(b)-n, err)
				}
			}
		}
	})
}

// FuzzEncode: any spelling either fails with ErrInvalidArgument or gives
// bytes that read back as exactly one key.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "k42", "été", "-1", "NaN", "true", "q", `["k1", 1]`, `[null, 2]`, `[["a","b"], 1.5]`, "00000000", "\xff"} {
		f.Add(s)
	}
	codecs := fuzzCodecs(f)
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range codecs {
			b, err := c.Encode(s)
			if err != nil {
				if !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
					t.Fatalf("%s Encode(%q): %v is not ErrInvalidArgument", c.Name(), s, err)
				}
				continue
			}
			n, err := c.Len(b)
			if err != nil || n != len(b) {
				t.Fatalf("%s Encode(%q) = %x: Len %d, %v", c.Name(), s, b, n, err)
			}
			if _, err := c.HashCode(b); err != nil {
				t.Fatalf("%s Encode(%q) = %x: HashCode %v", c.Name(), s, b, err)
			}
		}
	})
}

// FuzzForName: any type name either gives a codec or ErrInvalidArgument.
func FuzzForName(f *testing.F) {
	for _, s := range []string{"string", "tuple<string,long>", "row<tuple2<int,char>,double>", "tuple<", "rowdata"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ForName(s)
		if err != nil {
			if !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
				t.Fatalf("ForName(%q): %v", s, err)
			}
			return
		}
		if c.Name() == "" {
			t.Fatalf("ForName(%q): empty name", s)
		}
	})
}
