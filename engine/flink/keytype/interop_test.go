package keytype

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

// serializerClasses maps the serializer class names of
// testdata/keygroup_vectors.tsv to the snapshot classes the keyed-state
// header names.
var serializerClasses = map[string]string{
	"String":    ClassString,
	"Long":      ClassLong,
	"Integer":   ClassInt,
	"Short":     ClassShort,
	"Byte":      ClassByte,
	"Boolean":   ClassBoolean,
	"Character": ClassChar,
	"Double":    ClassDouble,
	"Float":     ClassFloat,
}

// interopSpec turns a type label of the f-interop vectors ("Tuple2<String,Long>",
// "Row<INT,STRING>" = a Table/SQL key) into a spec.
func interopSpec(t *testing.T, label string) Spec {
	t.Helper()
	if c, ok := serializerClasses[label]; ok {
		return Spec{Class: c}
	}
	if strings.HasPrefix(label, "Row<") {
		return Spec{Class: ClassRowData}
	}
	if strings.HasPrefix(label, "Tuple") {
		inner := label[strings.IndexByte(label, '<')+1 : len(label)-1]
		s := Spec{Class: ClassTuple}
		for _, f := range strings.Split(inner, ",") {
			c, ok := serializerClasses[f]
			if !ok {
				t.Fatalf("unknown field type %q in %s", f, label)
			}
			s.Nested = append(s.Nested, Spec{Class: c})
		}
		return s
	}
	t.Fatalf("unknown type %q", label)
	return Spec{}
}

// javaUnescape reads the value form of KeyGroups.java: \uXXXX for every
// UTF-16 unit outside printable ASCII. ok is false when the units are not
// valid UTF-16 (a lone surrogate), which a Go string cannot spell.
func javaUnescape(s string) (string, bool) {
	var units []uint16
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+5 < len(s) && s[i+1] == 'u' {
			v, err := strconv.ParseUint(s[i+2:i+6], 16, 16)
			if err == nil {
				units = append(units, uint16(v))
				i += 5
				continue
			}
		}
		units = append(units, uint16(s[i]))
	}
	for i := 0; i < len(units); i++ {
		u := units[i]
		if u >= 0xd800 && u < 0xdc00 && i+1 < len(units) && units[i+1] >= 0xdc00 && units[i+1] < 0xe000 {
			i++
			continue
		}
		if u >= 0xd800 && u < 0xe000 {
			return "", false
		}
	}
	return string(utf16.Decode(units)), true
}

// interopSpelling turns a value form into a spelling for Encode: strings
// unescaped, floats as the Java toString after "~", composites as a JSON
// array of strings.
func interopSpelling(label, value string) (string, bool) {
	field := func(v string) (string, bool) {
		if _, after, ok := strings.Cut(v, "~"); ok && strings.HasPrefix(v, "0x") {
			return after, true
		}
		return javaUnescape(v)
	}
	if !strings.HasPrefix(label, "Tuple") {
		return field(value)
	}
	var parts []string
	for _, p := range strings.Split(value, "|") {
		f, ok := field(p)
		if !ok {
			return "", false
		}
		parts = append(parts, f)
	}
	b, _ := json.Marshal(parts)
	return string(b), true
}

// TestInteropVectors checks every row of testdata/keygroup_vectors.tsv,
// which the f-interop helper's probe.KeyGroups (interop/flink) printed with
// Flink 2.3.0: the key bytes Flink's serializer writes, their Java
// hashCode, MathUtils.murmurHash and KeyGroupRangeAssignment at 8, 128, 256
// and 32768. Len, HashCode, MurmurHash and KeyGroup must agree on every row,
// and Encode of the value must give the same bytes where it can be spelled.
func TestInteropVectors(t *testing.T) {
	f, err := os.Open("testdata/keygroup_vectors.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	rows, encoded := 0, 0
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "#") || strings.HasPrefix(text, "type\t") || text == "" {
			continue
		}
		col := strings.Split(text, "\t")
		if len(col) != 10 {
			t.Fatalf("line %d: %d columns", line, len(col))
		}
		rows++
		label, value := col[0], col[1]
		spec := interopSpec(t, label)
		// The snapshot class is the serializer class plus its snapshot's name.
		if !strings.HasPrefix(spec.Class, col[3]) {
			t.Errorf("line %d: %s is written by %s, not by the serializer of %s", line, label, col[3], spec.Class)
		}
		c, err := ForSpec(spec)
		if err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		key, err := hex.DecodeString(col[2])
		if err != nil {
			t.Fatal(err)
		}
		num := func(i int) int64 {
			v, err := strconv.ParseInt(col[i], 10, 64)
			if err != nil {
				t.Fatalf("line %d col %d: %v", line, i, err)
			}
			return v
		}
		if n, err := c.Len(append(append([]byte{}, key...), 1, 2, 3)); err != nil || n != len(key) {
			t.Errorf("line %d %s %q: Len %d, %v; want %d", line, label, value, n, err, len(key))
		}
		h, err := c.HashCode(key)
		if err != nil || int64(h) != num(4) {
			t.Errorf("line %d %s %q: HashCode %d, %v; Java %d", line, label, value, h, err, num(4))
			continue
		}
		if m := MurmurHash(h); int64(m) != num(5) {
			t.Errorf("line %d %s %q: MurmurHash %d; Flink %d", line, label, value, m, num(5))
		}
		for i, m := range []int{8, 128, 256, 32768} {
			if kg := KeyGroup(h, m); int64(kg) != num(6+i) {
				t.Errorf("line %d %s %q: KeyGroup(%d) %d; Flink %d", line, label, value, m, kg, num(6+i))
			}
		}
		if strings.HasPrefix(label, "Row<") {
			continue // the value form names fields, Encode takes the row bytes
		}
		if sp, ok := interopSpelling(label, value); ok {
			enc, err := c.Encode(sp)
			if err != nil || !bytes.Equal(enc, key) {
				t.Errorf("line %d %s: Encode(%q) = %x, %v; Flink %x", line, label, sp, enc, err, key)
			}
			encoded++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows < 140 || encoded < 100 {
		t.Fatalf("%d rows, %d encoded", rows, encoded)
	}
	t.Logf("%d rows checked, %d spellings encoded", rows, encoded)
}
