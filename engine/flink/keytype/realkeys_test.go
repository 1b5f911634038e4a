package keytype

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestRealSavepointKeys reads every entry of the keyed-state files of real
// Flink 2.3.0 canonical savepoints (testdata/probe-keyed: the probe job of
// /work/share/flink-savepoints, heap and RocksDB backends, max parallelism
// 8, keys "k0".."k199" and -100..99) and checks that the key group Flink
// wrote in each key's prefix is the one this package computes from the key
// bytes, for state entries and timers alike.
//
// The test does not read _metadata (engine/flink does): it finds the first
// key-group section by trying offsets (see findSections); the counts at the
// end prove it found all the data.
func TestRealSavepointKeys(t *testing.T) {
	for _, backend := range []string{"heap-files", "rocksdb-files"} {
		files, err := filepath.Glob(filepath.Join("testdata/probe-keyed", backend, "*"))
		if err != nil || len(files) != 4 {
			t.Fatalf("%s: %d files, %v", backend, len(files), err)
		}
		keys := map[string]map[string]int{} // key serializer -> decoded key -> entries
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			spec, _, err := ReadKeySpec(b)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			c, err := ForSpec(spec)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			entries, ok := findSections(b, c)
			if !ok {
				t.Fatalf("%s: no offset walks to the end as key-group sections", f)
			}
			if keys[c.Name()] == nil {
				keys[c.Name()] = map[string]int{}
			}
			for _, e := range entries {
				kg := int(e.key[0] &^ 0x80) // 1-byte prefix at max parallelism 8; 0x80 is the meta-data flag
				rest := e.key[1:]
				if len(e.value) == 0 { // timers: prefix | i64 timestamp | key | namespace
					rest = rest[8:]
				}
				n, err := c.Len(rest)
				if err != nil {
					t.Fatalf("%s: key %x: %v", f, e.key, err)
				}
				// Then VoidNamespace, one 00 byte (and, for MapState, the user key).
				if n >= len(rest) || rest[n] != 0 {
					t.Fatalf("%s: key %x: %d key bytes, then no VoidNamespace", f, e.key, n)
				}
				h, err := c.HashCode(rest[:n])
				if err != nil {
					t.Fatal(err)
				}
				if got := KeyGroup(h, 8); got != kg {
					t.Errorf("%s: key %x: prefix says key group %d, hash %d gives %d", f, rest[:n], kg, h, got)
				}
				v, err := c.Decode(rest[:n])
				if err != nil {
					t.Fatal(err)
				}
				keys[c.Name()][fmt.Sprint(v)]++
			}
		}
		// Every key is there, with its state and its timer.
		str, lng := keys["String"], keys["Long"]
		if len(str) != 200 || len(lng) != 200 {
			t.Fatalf("%s: %d String keys, %d Long keys; want 200 each", backend, len(str), len(lng))
		}
		for i := 0; i < 200; i++ {
			if n := str[fmt.Sprintf("k%d", i)]; n != 2 {
				t.Errorf("%s: key k%d has %d entries, want count + timer", backend, i, n)
			}
			if n := lng[fmt.Sprint(i-100)]; n != 3 {
				t.Errorf("%s: key %d has %d entries, want tags + events + timer", backend, i-100, n)
			}
		}
	}
}

type entry struct{ key, value []byte }

// findSections takes the first offset from which the file walks as
// sections whose keys all parse with c and are followed by VoidNamespace:
// bytes inside the header can look like a short walk, but not like that.
// Which key groups the keys hash to plays no part in the choice.
func findSections(b []byte, c Codec) ([]entry, bool) {
next:
	for start := 9; start < len(b); start++ {
		es, ok := walkSections(b, start)
		if !ok {
			continue
		}
		for _, e := range es {
			rest := e.key[1:]
			if len(e.value) == 0 {
				if len(rest) < 8 {
					continue next
				}
				rest = rest[8:]
			}
			if n, err := c.Len(rest); err != nil || n >= len(rest) || rest[n] != 0 {
				continue next
			}
		}
		return es, true
	}
	return nil, false
}

// walkSections reads u16 state id, then entries (i32 len, key, i32 len,
// value; a key whose first byte has 0x80 is followed by the next state id
// or 0xFFFF, the end of the key group), section after section, and
// succeeds only if that ends exactly at the end of b.
func walkSections(b []byte, pos int) ([]entry, bool) {
	var out []entry
	u32 := func() (int, bool) {
		if pos+4 > len(b) {
			return 0, false
		}
		v := int32(binary.BigEndian.Uint32(b[pos:]))
		pos += 4
		return int(v), v >= 0 && int(v) <= len(b)-pos
	}
	for pos < len(b) {
		if pos+2 > len(b) {
			return nil, false
		}
		pos += 2 // state id
		for {
			kl, ok := u32()
			if !ok || kl < 2 {
				return nil, false
			}
			key := b[pos : pos+kl]
			pos += kl
			vl, ok := u32()
			if !ok {
				return nil, false
			}
			out = append(out, entry{key, b[pos : pos+vl]})
			pos += vl
			if key[0]&0x80 != 0 {
				if pos+2 > len(b) {
					return nil, false
				}
				next := binary.BigEndian.Uint16(b[pos:])
				pos += 2
				if next == 0xFFFF {
					break
				}
			}
		}
	}
	return out, len(out) > 0
}
