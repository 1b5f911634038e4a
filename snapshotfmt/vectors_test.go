package snapshotfmt

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The test vectors live in FORMAT.md, the normative spec; this test parses
// them from there so the document and the code cannot drift apart.
// interop/test_hash_vectors.py checks the same lines against Python's
// xxhash and an independent implementation.

// formatBlocks returns the lines of every fenced block in FORMAT.md whose
// info string starts with "vectors-", by block name, comments dropped.
func formatBlocks(t *testing.T) map[string][][]string {
	t.Helper()
	data, err := os.ReadFile("FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string][][]string{}
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case cur == "" && strings.HasPrefix(line, "```vectors-"):
			cur = strings.TrimPrefix(line, "```")
			blocks[cur] = [][]string{}
		case cur != "" && line == "```":
			cur = ""
		case cur != "" && line != "" && !strings.HasPrefix(line, "#"):
			blocks[cur] = append(blocks[cur], strings.Fields(line))
		}
	}
	if cur != "" {
		t.Fatalf("FORMAT.md: block %s is not closed", cur)
	}
	return blocks
}

// parseBytes reads the byte-string notation of FORMAT.md: hex, "-" for
// empty, or HH*COUNT.
func parseBytes(s string) ([]byte, error) {
	if s == "-" {
		return []byte{}, nil
	}
	if b, n, ok := strings.Cut(s, "*"); ok {
		v, err := hex.DecodeString(b)
		if err != nil || len(v) != 1 {
			return nil, fmt.Errorf("repeat %q: want one hex byte", s)
		}
		c, err := strconv.Atoi(n)
		if err != nil || c < 0 {
			return nil, fmt.Errorf("repeat %q: bad count", s)
		}
		return bytes.Repeat(v, c), nil
	}
	return hex.DecodeString(s)
}

func mustBytes(t *testing.T, s string) []byte {
	t.Helper()
	b, err := parseBytes(s)
	if err != nil {
		t.Fatalf("FORMAT.md: %v", err)
	}
	return b
}

func mustUint(t *testing.T, s string, bits int) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		t.Fatalf("FORMAT.md: %v", err)
	}
	return v
}

func block(t *testing.T, blocks map[string][][]string, name string, minRows int) [][]string {
	t.Helper()
	rows, ok := blocks[name]
	if !ok {
		t.Fatalf("FORMAT.md has no ```%s block", name)
	}
	if len(rows) < minRows {
		t.Fatalf("FORMAT.md: %s has %d vectors, want at least %d", name, len(rows), minRows)
	}
	return rows
}

func TestFormatVectorsHash(t *testing.T) {
	rows := block(t, formatBlocks(t), "vectors-hash", 5)
	ns := []int{8, 128, 1000}
	sawEmpty := false
	for _, r := range rows {
		if len(r) != 2+2*len(ns) {
			t.Fatalf("vectors-hash line %q: want %d fields", r, 2+2*len(ns))
		}
		key := mustBytes(t, r[0])
		sawEmpty = sawEmpty || len(key) == 0
		want, err := strconv.ParseUint(r[1], 16, 64)
		if err != nil {
			t.Fatalf("vectors-hash %s: hash %q: %v", r[0], r[1], err)
		}
		h := HashKey(key)
		if h != want {
			t.Errorf("HashKey(%s) = %016x, FORMAT.md says %s", r[0], h, r[1])
		}
		for j, n := range ns {
			for k, m := range []Mapping{MappingMod, MappingRange} {
				p, err := NewPartitioning(m, n)
				if err != nil {
					t.Fatal(err)
				}
				wantB := mustUint(t, r[2+2*j+k], 32)
				if got := p.Bucket(key); uint64(got) != wantB {
					t.Errorf("%s bucket of %s = %d, FORMAT.md says %d", p, r[0], got, wantB)
				}
				if got := p.BucketOfHash(want); uint64(got) != wantB {
					t.Errorf("%s BucketOfHash(%s) = %d, FORMAT.md says %d", p, r[1], got, wantB)
				}
			}
		}
	}
	if !sawEmpty {
		t.Error("vectors-hash has no vector for the empty key")
	}
}

func TestFormatVectorsKey(t *testing.T) {
	for _, r := range block(t, formatBlocks(t), "vectors-key", 3) {
		if len(r) != 5 {
			t.Fatalf("vectors-key line %q: want 5 fields", r)
		}
		b := uint32(mustUint(t, r[0], 32))
		s := uint16(mustUint(t, r[1], 16))
		key, sub, want := mustBytes(t, r[2]), mustBytes(t, r[3]), mustBytes(t, r[4])
		if got := EncodeKey(b, s, key, sub); !bytes.Equal(got, want) {
			t.Errorf("EncodeKey(%d, %d, %s, %s) = %x, FORMAT.md says %x", b, s, r[2], r[3], got, want)
		}
		dk, err := DecodeKey(want)
		if err != nil {
			t.Fatalf("DecodeKey(%s): %v", r[4], err)
		}
		if dk.Bucket != b || dk.State != s || !bytes.Equal(dk.Key, key) || !bytes.Equal(dk.SubKey, sub) {
			t.Errorf("DecodeKey(%s) = %+v", r[4], dk)
		}
	}
}

func TestFormatVectorsItems(t *testing.T) {
	for _, r := range block(t, formatBlocks(t), "vectors-items", 3) {
		enc := mustBytes(t, r[0])
		items := [][]byte{}
		for _, f := range r[1:] {
			items = append(items, mustBytes(t, f))
		}
		if got := EncodeWorkerItems(items); !bytes.Equal(got, enc) {
			t.Errorf("EncodeWorkerItems(%q) = %x, FORMAT.md says %s", r[1:], got, r[0])
		}
		dec, err := DecodeWorkerItems(enc)
		if err != nil {
			t.Fatalf("DecodeWorkerItems(%s): %v", r[0], err)
		}
		if len(dec) != len(items) {
			t.Fatalf("DecodeWorkerItems(%s) gave %d items, want %d", r[0], len(dec), len(items))
		}
		for i := range dec {
			if !bytes.Equal(dec[i], items[i]) {
				t.Errorf("DecodeWorkerItems(%s)[%d] = %x, want %x", r[0], i, dec[i], items[i])
			}
		}
	}
}

func TestFormatVectorsChecksum(t *testing.T) {
	for _, r := range block(t, formatBlocks(t), "vectors-checksum", 2) {
		if len(r) != 2 {
			t.Fatalf("vectors-checksum line %q: want 2 fields", r)
		}
		if got := Checksum(mustBytes(t, r[0])); got != r[1] {
			t.Errorf("Checksum(%s) = %s, FORMAT.md says %s", r[0], got, r[1])
		}
	}
}

func TestFormatVectorsWorkers(t *testing.T) {
	seen := map[[2]int]bool{}
	for _, r := range block(t, formatBlocks(t), "vectors-workers", 3) {
		n, w := int(mustUint(t, r[0], 32)), int(mustUint(t, r[1], 32))
		seen[[2]int{n, w}] = true
		if len(r) != 2+w {
			t.Fatalf("vectors-workers %d %d: %d ranges, want %d", n, w, len(r)-2, w)
		}
		var idle []int
		for i := 0; i < w; i++ {
			lo, hi, ok := WorkerRange(i, w, n)
			got := "-"
			if ok {
				got = fmt.Sprintf("%d..%d", lo, hi)
			} else {
				idle = append(idle, i)
			}
			if got != r[2+i] {
				t.Errorf("WorkerRange(%d, %d, %d) = %s, FORMAT.md says %s", i, w, n, got, r[2+i])
			}
		}
		if gotIdle := IdleWorkers(w, n); fmt.Sprint(gotIdle) != fmt.Sprint(idle) {
			t.Errorf("IdleWorkers(%d, %d) = %v, want %v", w, n, gotIdle, idle)
		}
	}
	// DESIGN.md section 2 names these examples; they must stay in the spec.
	for _, nw := range [][2]int{{8, 2}, {8, 4}, {8, 12}} {
		if !seen[nw] {
			t.Errorf("vectors-workers lacks N=%d W=%d", nw[0], nw[1])
		}
	}
}

// TestFormatVectorsParser makes sure the parser itself rejects what it must,
// so a typo in FORMAT.md fails loudly rather than testing nothing.
func TestFormatVectorsParser(t *testing.T) {
	for _, s := range []string{"6", "zz", "6161*3", "61*x"} {
		if _, err := parseBytes(s); err == nil {
			t.Errorf("parseBytes(%q) accepted", s)
		}
	}
	if b, _ := parseBytes("61*3"); string(b) != "aaa" {
		t.Errorf("parseBytes(61*3) = %q", b)
	}
}

// TestFormatNamesEveryField: every JSON field of the manifest, every codec
// and the format's fixed names appear in FORMAT.md, so a field added to the
// code without a line in the spec fails here.
func TestFormatNamesEveryField(t *testing.T) {
	data, err := os.ReadFile("FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, v := range []any{Manifest{}, Partitioning{}, State{}, DataFile{}, WorkerState{}, WorkerFile{}, Lineage{}} {
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			// In backquotes, possibly as a path: `files[].path`, `states[]`.
			re := regexp.MustCompile("`[a-z_.\\[\\]]*\\b" + tag + "\\b")
			if !re.MatchString(doc) {
				t.Errorf("FORMAT.md does not name %s field %q", rt.Name(), tag)
			}
		}
	}
	for c := range KnownCodecs {
		if c != "" && !strings.Contains(doc, "| `"+c+"`") {
			t.Errorf("FORMAT.md's codec table lacks %q", c)
		}
	}
	for _, s := range []string{FormatName, TableFormat, HashName, ManifestName, string(MappingMod), string(MappingRange),
		string(KindValue), string(KindMap), string(KindList), string(RuleSplit), string(RuleUnion), string(RuleBroadcast)} {
		if !strings.Contains(doc, "`"+s+"`") {
			t.Errorf("FORMAT.md does not name %q", s)
		}
	}
	if MaxManifestSize != 64<<20 || !strings.Contains(doc, "64 MiB") {
		t.Error("FORMAT.md and MaxManifestSize disagree")
	}
}
