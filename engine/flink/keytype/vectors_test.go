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

// TestJavaVectors checks every row of testdata/java_vectors.tsv, written by
// testdata/javagen/KeyVectors.java with Flink 2.3.0's own serializers,
// hashCode() and KeyGroupRangeAssignment: the codec chosen by the snapshot
// class must find the same length, hash, key groups and fixed length, and
// Encode of the spelling must give Flink's bytes.
func TestJavaVectors(t *testing.T) {
	f, err := os.Open("testdata/java_vectors.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	maxPars := []int{8, 128, 256, 32768}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	rows := 0
	for line := 0; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "#") || text == "" {
			continue
		}
		col := strings.Split(text, "\t")
		if len(col) != 11 {
			t.Fatalf("line %d: %d columns, want 11", line+1, len(col))
		}
		rows++
		label, class, nestedCol := col[0], col[1], col[2]
		var nested []string
		if nestedCol != "-" {
			nested = strings.Split(nestedCol, ",")
		}
		fixed, _ := strconv.Atoi(col[3])
		key, err := hex.DecodeString(col[4])
		if err != nil {
			t.Fatalf("line %d: %v", line+1, err)
		}
		hash64, _ := strconv.ParseInt(col[5], 10, 32)
		want := int32(hash64)
		c, err := ForSerializer(class, nested)
		if err != nil {
			t.Errorf("line %d %s: ForSerializer: %v", line+1, label, err)
			continue
		}
		if c.FixedLen() != fixed {
			t.Errorf("line %d %s: FixedLen %d, Flink getLength %d", line+1, label, c.FixedLen(), fixed)
		}
		// Len must stop at the key's end even with bytes after it.
		n, err := c.Len(append(append([]byte{}, key...), 0xAB, 0xCD, 0xEF))
		if err != nil || n != len(key) {
			t.Errorf("line %d %s %s: Len = %d, %v; want %d", line+1, label, col[4], n, err, len(key))
		}
		h, err := c.HashCode(key)
		if err != nil || h != want {
			t.Errorf("line %d %s %s: HashCode = %d, %v; Java %d", line+1, label, col[4], h, err, want)
		}
		for i, m := range maxPars {
			kg, _ := strconv.Atoi(col[6+i])
			if got := KeyGroup(h, m); got != kg {
				t.Errorf("line %d %s %s: KeyGroup(%d, %d) = %d, Flink %d", line+1, label, col[4], h, m, got, kg)
			}
		}
		if _, err := c.Decode(key); err != nil {
			t.Errorf("line %d %s: Decode: %v", line+1, label, err)
		}
		if sp := col[10]; sp != "-" {
			enc, err := c.Encode(sp)
			if err != nil || !bytes.Equal(enc, key) {
				t.Errorf("line %d %s: Encode(%q) = %x, %v; Flink %x", line+1, label, sp, enc, err, key)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows < 90 {
		t.Fatalf("only %d vector rows", rows)
	}
}
