package spark

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/rebucket/rebucket/internal/lz4java"
	"github.com/rebucket/rebucket/snapshotfmt"
)

type rec struct {
	k, v string
	del  bool
}

// writeState writes records as an lz4-compressed state file.
func writeState(t *testing.T, path string, recs []rec) {
	t.Helper()
	var raw []byte
	for _, r := range recs {
		raw = AppendRecord(raw, []byte(r.k), []byte(r.v), r.del)
	}
	raw = append(raw, EndRecord...)
	var out bytes.Buffer
	z := lz4java.NewWriter(&out, 256)
	if _, err := z.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func collect(t *testing.T, run func(fn func(k, v []byte) error) error) (map[string]string, error) {
	t.Helper()
	got := map[string]string{}
	err := run(func(k, v []byte) error {
		if _, dup := got[string(k)]; dup {
			t.Fatalf("key %q handed out twice", k)
		}
		got[string(k)] = string(v)
		return nil
	})
	return got, err
}

func sameRows(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("%s: key %q = %q (present %v), want %q", what, k, g, ok, v)
		}
	}
}

// Streaming a version (snapshot or first delta, then the deltas above it
// as an overlay with tombstones) hands out exactly the rows of a whole
// load: updates, deletes of base keys, deletes then re-puts, deletes of
// absent keys, keys new in the deltas.
func TestStreamRowsMatchesLoad(t *testing.T) {
	for _, withSnap := range []bool{true, false} {
		t.Run(fmt.Sprintf("snapshot=%v", withSnap), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 8))
			dir := t.TempDir()
			var base []rec
			for i := range 3000 {
				base = append(base, rec{k: "k" + strconv.Itoa(i), v: "b" + strconv.Itoa(i)})
			}
			first := int64(1)
			if withSnap {
				first = 3
				writeState(t, filepath.Join(dir, "3.snapshot"), base)
				writeState(t, filepath.Join(dir, "2.delta"), []rec{{k: "stale", v: "x"}}) // below the snapshot: ignored
			} else {
				writeState(t, filepath.Join(dir, "1.delta"), base)
			}
			for v := first + 1; v <= first+4; v++ {
				var d []rec
				for range 400 {
					k := "k" + strconv.Itoa(r.IntN(3600)) // some beyond the base
					switch r.IntN(3) {
					case 0:
						d = append(d, rec{k: k, del: true})
					default:
						d = append(d, rec{k: k, v: fmt.Sprintf("d%d-%d", v, r.IntN(1000))})
					}
				}
				writeState(t, filepath.Join(dir, strconv.FormatInt(v, 10)+".delta"), d)
			}
			top := first + 4
			for v := first; v <= top; v++ {
				ls, err := LoadPartition(dir, v)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := collect(t, ls.Each)
				pf, err := ListPartition(dir)
				if err != nil {
					t.Fatal(err)
				}
				got, err := collect(t, func(fn func(k, v []byte) error) error {
					_, _, ok, err := streamRows(pf, v, betOnDelta, fn)
					if !ok {
						t.Fatal("not streamed")
					}
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				sameRows(t, fmt.Sprintf("stream v%d", v), got, want)
				got, err = collect(t, func(fn func(k, v []byte) error) error {
					_, _, err := ForEachRow(dir, v, fn)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				sameRows(t, fmt.Sprintf("ForEachRow v%d", v), got, want)
			}
		})
	}
}

// A first delta that puts a key twice or deletes a key loses the bet:
// errBaseNotUnique, never a wrong row set handed out as complete.
func TestStreamRowsFirstDeltaNotUnique(t *testing.T) {
	for name, recs := range map[string][]rec{
		"repeated key": {{k: "a", v: "1"}, {k: "b", v: "2"}, {k: "a", v: "3"}},
		"delete":       {{k: "a", v: "1"}, {k: "a", del: true}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeState(t, filepath.Join(dir, "1.delta"), recs)
			pf, err := ListPartition(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, _, _, err = streamRows(pf, 1, betOnDelta, func(k, v []byte) error { return nil })
			if !errors.Is(err, errBaseNotUnique) {
				t.Fatalf("err %v, want errBaseNotUnique", err)
			}
			// Not optimistic: nothing streamed, the caller loads it whole.
			if _, _, ok, err := streamRows(pf, 1, snapshotBase, func(k, v []byte) error { return nil }); ok || err != nil {
				t.Fatalf("not optimistic: ok %v err %v", ok, err)
			}
			got, err := collect(t, func(fn func(k, v []byte) error) error {
				_, _, err := ForEachRow(dir, 1, fn)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"a": "3", "b": "2"}
			if name == "delete" {
				want = map[string]string{}
			}
			sameRows(t, "ForEachRow", got, want)
		})
	}
}

// Rewrite of a checkpoint whose 1.delta repeats a key (the streamed bet
// lost) starts over with whole loads and still writes the right rows:
// the repeated key once, with its last value.
func TestRewriteFallsBackOnRepeatedKey(t *testing.T) {
	src := filepath.Join(t.TempDir(), "ck")
	if err := Generate(src, GenerateOptions{Keys: 2000, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(src, "state", "0", "0")
	var recs []rec
	if _, err := ReadStateFile(filepath.Join(part, "1.delta"), func(k, v []byte, del bool) error {
		recs = append(recs, rec{k: string(k), v: string(v), del: del})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The first key again at the end, with the value of another row: the
	// state holds the last one.
	recs = append(recs, rec{k: recs[0].k, v: recs[1].v})
	writeState(t, filepath.Join(part, "1.delta"), recs)
	os.Remove(filepath.Join(part, ".1.delta.crc"))

	want := map[string]string{}
	for _, p := range []string{"0", "1"} {
		ls, err := LoadPartition(filepath.Join(src, "state", "0", p), 1)
		if err != nil {
			t.Fatal(err)
		}
		ls.Each(func(k, v []byte) error { want[string(k)] = string(v); return nil })
	}
	if want[recs[0].k] != recs[1].v {
		t.Fatal("test setup: the repeated key does not hold its last value")
	}
	dst := filepath.Join(t.TempDir(), "out")
	res, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != uint64(len(want)) {
		t.Fatalf("%d rows rewritten, want %d", res.Rows, len(want))
	}
	got := map[string]string{}
	for q := range 3 {
		dir := filepath.Join(dst, "state", "0", strconv.Itoa(q))
		names, _ := filepath.Glob(filepath.Join(dir, "*.snapshot"))
		if len(names) != 1 {
			t.Fatalf("partition %d: snapshots %v, want one", q, names)
		}
		if _, err := ReadStateFile(names[0], func(k, v []byte, _ bool) error {
			if _, dup := got[string(k)]; dup {
				t.Fatalf("key %x written twice", k)
			}
			got[string(k)] = string(v)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	sameRows(t, "rewritten", got, want)
}

// ReadRecords hands out every record as written, records larger than its
// buffer and deletes included, and calls a stream cut anywhere damage.
func TestReadRecordsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var recs []rec
	var raw []byte
	for i := range 300 {
		n := r.IntN(64)
		if i%50 == 7 {
			n = 64<<10 + r.IntN(70<<10) // beyond the 64 KiB buffer
		}
		k := fmt.Sprintf("k%d-%s", i, bytes.Repeat([]byte{'x'}, r.IntN(40)))
		if i%97 == 3 {
			k = string(bytes.Repeat([]byte{'K'}, 70<<10)) + strconv.Itoa(i)
		}
		rc := rec{k: k, v: string(bytes.Repeat([]byte{byte(i)}, n)), del: i%11 == 0}
		if rc.del {
			rc.v = ""
		}
		recs = append(recs, rc)
		raw = AppendRecord(raw, []byte(rc.k), []byte(rc.v), rc.del)
	}
	raw = append(raw, EndRecord...)
	var got []rec
	n, err := ReadRecords(bytes.NewReader(raw), true, func(k, v []byte, del bool) error {
		got = append(got, rec{k: string(k), v: string(v), del: del})
		return nil
	})
	if err != nil || n != int64(len(recs)) {
		t.Fatalf("n %d err %v", n, err)
	}
	for i := range recs {
		if got[i] != recs[i] {
			t.Fatalf("record %d differs", i)
		}
	}
	for _, cut := range []int{0, 3, 5, 9, 100, len(raw) / 2, len(raw) - 5, len(raw) - 1} {
		_, err := ReadRecords(bytes.NewReader(raw[:cut]), true, func(k, v []byte, del bool) error { return nil })
		if !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Fatalf("cut at %d: %v, want ErrCorrupt", cut, err)
		}
	}
	if _, err := ReadRecords(bytes.NewReader(append(slices.Clone(raw), 0)), true, func(k, v []byte, del bool) error { return nil }); !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := ReadRecords(bytes.NewReader(raw), false, func(k, v []byte, del bool) error { return nil }); !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Fatalf("delete in a snapshot: %v", err)
	}
}
