package keytype

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
)

type vector struct {
	line     int
	label    string
	codec    Codec
	fixed    int
	key      []byte
	hash     int32
	groups   [4]int // at maxPars
	spelling string // "-" when none
}

var maxPars = [4]int{8, 128, 256, 32768}

// loadVectors reads testdata/java_vectors.tsv, written by
// testdata/javagen/KeyVectors.java with Flink 2.3.0's own serializers,
// hashCode() and KeyGroupRangeAssignment, and picks each row's codec by the
// snapshot class Flink reports.
func loadVectors(t testing.TB) []vector {
	t.Helper()
	f, err := os.Open("testdata/java_vectors.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var out []vector
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "#") || text == "" {
			continue
		}
		col := strings.Split(text, "\t")
		if len(col) != 11 {
			t.Fatalf("line %d: %d columns, want 11", line, len(col))
		}
		v := vector{line: line, label: col[0], spelling: col[10]}
		var nested []string
		if col[2] != "-" {
			nested = strings.Split(col[2], ",")
		}
		if v.codec, err = ForSerializer(col[1], nested); err != nil {
			t.Fatalf("line %d %s: ForSerializer: %v", line, v.label, err)
		}
		v.fixed, _ = strconv.Atoi(col[3])
		if v.key, err = hex.DecodeString(col[4]); err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		h, err := strconv.ParseInt(col[5], 10, 32)
		if err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		v.hash = int32(h)
		for i := range maxPars {
			if v.groups[i], err = strconv.Atoi(col[6+i]); err != nil {
				t.Fatalf("line %d: %v", line, err)
			}
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 90 {
		t.Fatalf("only %d vector rows", len(out))
	}
	return out
}

// TestJavaVectors: for every key Flink serialized, the codec must find the
// same length, hash, key groups and fixed length, and Encode of the
// spelling must give Flink's bytes.
func TestJavaVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		c := v.codec
		if c.FixedLen() != v.fixed {
			t.Errorf("line %d %s: FixedLen %d, Flink getLength %d", v.line, v.label, c.FixedLen(), v.fixed)
		}
		// Len must stop at the key's end even with bytes after it.
		n, err := c.Len(append(append([]byte{}, v.key...), 0xAB, 0xCD, 0xEF))
		if err != nil || n != len(v.key) {
			t.Errorf("line %d %s %x: Len = %d, %v; want %d", v.line, v.label, v.key, n, err, len(v.key))
		}
		if ln, lh, err := LenHash(c, append(append([]byte{}, v.key...), 0x01)); err != nil || ln != len(v.key) || lh != v.hash {
			t.Errorf("line %d %s %x: LenHash = %d, %d, %v; want %d, %d", v.line, v.label, v.key, ln, lh, err, len(v.key), v.hash)
		}
		h, err := c.HashCode(v.key)
		if err != nil || h != v.hash {
			t.Errorf("line %d %s %x: HashCode = %d, %v; Java %d", v.line, v.label, v.key, h, err, v.hash)
		}
		for i, m := range maxPars {
			if got := KeyGroup(h, m); got != v.groups[i] {
				t.Errorf("line %d %s %x: KeyGroup(%d, %d) = %d, Flink %d", v.line, v.label, v.key, h, m, got, v.groups[i])
			}
		}
		if _, err := c.Decode(v.key); err != nil {
			t.Errorf("line %d %s: Decode: %v", v.line, v.label, err)
		}
		if v.spelling != "-" {
			enc, err := c.Encode(v.spelling)
			if err != nil || !bytes.Equal(enc, v.key) {
				t.Errorf("line %d %s: Encode(%q) = %x, %v; Flink %x", v.line, v.label, v.spelling, enc, err, v.key)
			}
		}
	}
}
