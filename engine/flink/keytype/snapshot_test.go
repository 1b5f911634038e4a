package keytype

import (
	"bufio"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// TestJavaSnapshots reads serializer snapshots exactly as Flink 2.3.0 wrote
// them (testdata/java_snapshots.tsv, from testdata/javagen) and checks that
// the spec read from them gives the codec of the right type, or is refused
// (labels starting with "!": a Kryo key, a Kryo field, a user subclass of
// Tuple2 that overrides hashCode).
func TestJavaSnapshots(t *testing.T) {
	f, err := os.Open("testdata/java_snapshots.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	rows := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		label, hx, _ := strings.Cut(sc.Text(), "\t")
		b, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatal(err)
		}
		rows++
		spec, n, err := ReadSerializerSnapshot(b)
		var c Codec
		if err == nil {
			c, err = ForSpec(spec)
		}
		if strings.HasPrefix(label, "!") {
			if !errors.Is(err, ErrUnsupportedKey) {
				t.Errorf("%s: err %v, want ErrUnsupportedKey", label, err)
			} else if !strings.Contains(err.Error(), "Kryo") && !strings.Contains(err.Error(), "MyTuple2") {
				t.Errorf("%s: %q does not name the class", label, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", label, err)
			continue
		}
		want := label
		switch {
		case strings.HasPrefix(label, "RowData"), label == "BinaryRowData":
			want = "RowData"
		case label == "Tuple25<Integer*25>":
			want = "Tuple25<" + strings.TrimSuffix(strings.Repeat("Integer,", 25), ",") + ">"
		}
		if c.Name() != want {
			t.Errorf("%s: codec %s", label, c.Name())
		}
		wantN := len(b)
		if strings.HasPrefix(label, "RowData") {
			wantN = -1 // its body (Java-serialized logical types) is not delimited
		}
		if n != wantN {
			t.Errorf("%s: read %d bytes of %d", label, n, wantN)
		}
		// Truncated snapshots are corrupt, never a panic or a wrong type.
		for cut := 0; cut < len(b) && wantN > 0; cut++ {
			if _, _, err := ReadSerializerSnapshot(b[:cut]); !errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Fatalf("%s cut to %d: %v, want ErrCorrupt", label, cut, err)
			}
		}
	}
	if rows < 20 {
		t.Fatalf("%d rows", rows)
	}
}

// TestReadKeySpecRealHeaders reads the key serializer from the headers of
// real Flink 2.3.0 keyed-state files, with and without compression.
func TestReadKeySpecRealHeaders(t *testing.T) {
	for dir, compressed := range map[string]bool{"heap-files": false, "rocksdb-files": false, "heap-files-snappy": true} {
		files, _ := filepath.Glob(filepath.Join("testdata/probe-keyed", dir, "*"))
		if len(files) != 4 {
			t.Fatalf("%s: %d files", dir, len(files))
		}
		names := map[string]int{}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			spec, comp, err := ReadKeySpec(b)
			if err != nil || comp != compressed {
				t.Fatalf("%s: compressed %v, %v", f, comp, err)
			}
			c, err := ForSpec(spec)
			if err != nil {
				t.Fatal(err)
			}
			names[c.Name()]++
		}
		if names["String"] != 2 || names["Long"] != 2 {
			t.Errorf("%s: key types %v, want 2 String and 2 Long files", dir, names)
		}
	}
	bad := map[string][]byte{
		"short":       {0, 0, 0, 6},
		"version 5":   {0, 0, 0, 5, 0, 0, 0, 0, 2},
		"flag 2":      {0, 0, 0, 6, 2, 0, 0, 0, 2},
		"proxy 3":     {0, 0, 0, 6, 0, 0, 0, 0, 3},
		"class short": {0, 0, 0, 6, 0, 0, 0, 0, 2, 0, 9, 'o'},
	}
	for name, b := range bad {
		if _, _, err := ReadKeySpec(b); !errors.Is(err, snapshotfmt.ErrCorrupt) && !errors.Is(err, ErrUnsupportedKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzReadSerializerSnapshot: no panic, errors are ErrCorrupt or
// ErrUnsupportedKey, and a length read stays inside the input.
func FuzzReadSerializerSnapshot(f *testing.F) {
	if b, err := os.ReadFile("testdata/java_snapshots.tsv"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if _, hx, ok := strings.Cut(line, "\t"); ok {
				if raw, err := hex.DecodeString(hx); err == nil {
					f.Add(raw)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		spec, n, err := ReadSerializerSnapshot(b)
		if err != nil {
			if !errors.Is(err, snapshotfmt.ErrCorrupt) && !errors.Is(err, ErrUnsupportedKey) {
				t.Fatalf("%x: %v", b, err)
			}
			return
		}
		if n > len(b) || n < -1 || n == 0 {
			t.Fatalf("%x: read %d", b, n)
		}
		if _, err := ForSpec(spec); err != nil && !errors.Is(err, ErrUnsupportedKey) && !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Fatalf("%x: ForSpec %v", b, err)
		}
	})
}
