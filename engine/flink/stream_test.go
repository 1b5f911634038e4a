package flink

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// realCanonical are real Flink 2.3.0 canonical savepoints of the probe job
// (testdata/probe-*/, copied from interop's output; see testdata/README.txt).
var realCanonical = []string{"heap-files", "heap-files-snappy", "heap-inline", "rocksdb-files", "rocksdb-inline"}

type rawEntry struct {
	kg, state  int
	key, value string
}

func readAll(t testing.TB, ks *KeyedStream) []rawEntry {
	t.Helper()
	var out []rawEntry
	err := ks.ForEach(func(kg int, e Entry) error {
		out = append(out, rawEntry{kg, e.StateID, string(e.Key), string(e.Value)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRealSavepointsRead(t *testing.T) {
	for _, name := range realCanonical {
		sp, err := Open("testdata/probe-" + name)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := sp.Meta.Encode(); !bytes.Equal(b, sp.MetaBytes) {
			t.Fatalf("%s: _metadata does not round-trip", name)
		}
		if len(sp.Meta.Trailing) == 0 || !bytes.HasPrefix(sp.Meta.Trailing, []byte{0xac, 0xed, 0, 5}) {
			t.Fatalf("%s: trailing properties %x", name, sp.Meta.Trailing)
		}
		counts := map[string]int{}
		kinds := map[string]string{}
		for _, op := range sp.Meta.Operators {
			if op.MaxParallelism != 8 {
				t.Fatalf("%s: %s max parallelism %d", name, op.Label(), op.MaxParallelism)
			}
			for _, st := range op.Subtasks {
				if st.ManagedKeyed == nil {
					continue
				}
				ks, err := sp.OpenKeyed(op, st.Index, st.ManagedKeyed)
				if err != nil {
					t.Fatal(err)
				}
				if ks.Header.Compressed != strings.HasSuffix(name, "snappy") {
					t.Fatalf("%s: compressed=%v", name, ks.Header.Compressed)
				}
				for _, e := range readAll(t, ks) {
					s := ks.Header.States[e.state]
					counts[op.UID+"/"+s.Name]++
					kinds[s.Name] = s.Kind()
					if e.key[0] != byte(e.kg) {
						t.Fatalf("%s: prefix %x in key group %d", name, e.key[0], e.kg)
					}
				}
				ks.Close()
			}
		}
		want := map[string]int{"str-counter/count": 200, "str-counter/_timer_state/event_user-timers": 200,
			"long-agg/tags": 200, "long-agg/events": 200, "long-agg/_timer_state/event_user-timers": 200}
		if fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Fatalf("%s: entries %v, want %v", name, counts, want)
		}
		if kinds["count"] != "VALUE" || kinds["tags"] != "MAP" || kinds["events"] != "LIST" || kinds["_timer_state/event_user-timers"] != "TIMERS" {
			t.Fatalf("%s: kinds %v", name, kinds)
		}
	}
}

// TestStreamWriterReproducesFlink rewrites every real stream entry by
// entry with StreamWriter: uncompressed streams come out byte for byte as
// Flink wrote them, compressed ones decode to the same entries.
func TestStreamWriterReproducesFlink(t *testing.T) {
	for _, name := range realCanonical {
		sp, err := Open("testdata/probe-" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range sp.Meta.Operators {
			for _, st := range op.Subtasks {
				h := st.ManagedKeyed
				if h == nil {
					continue
				}
				ks, err := sp.OpenKeyed(op, st.Index, h)
				if err != nil {
					t.Fatal(err)
				}
				entries := readAll(t, ks)
				var buf bytes.Buffer
				w, err := NewStreamWriter(&buf, ks.HeaderBytes, int(h.StartKeyGroup), len(h.Offsets))
				if err != nil {
					t.Fatal(err)
				}
				kg := -1
				for _, e := range entries {
					if e.kg != kg {
						if err := w.StartKeyGroup(e.kg); err != nil {
							t.Fatal(err)
						}
						kg = e.kg
					}
					if err := w.Add(e.state, []byte(e.key), []byte(e.value)); err != nil {
						t.Fatal(err)
					}
				}
				offs, size, err := w.Finish()
				if err != nil {
					t.Fatal(err)
				}
				if !ks.Header.Compressed {
					orig := make([]byte, ks.Size)
					ks.r.ReadAt(orig, 0)
					if !bytes.Equal(orig, buf.Bytes()) || fmt.Sprint(offs) != fmt.Sprint(h.Offsets) {
						t.Fatalf("%s %s subtask %d: rewritten stream differs (offsets %v vs %v)", name, op.UID, st.Index, offs, h.Offsets)
					}
				}
				nh := &KeyedHandle{StartKeyGroup: h.StartKeyGroup, Offsets: offs}
				ks2, err := openKeyedStream("rewritten", nh, bytes.NewReader(buf.Bytes()), size)
				if err != nil {
					t.Fatal(err)
				}
				if got := readAll(t, ks2); fmt.Sprint(got) != fmt.Sprint(entries) {
					t.Fatalf("%s: entries differ after rewrite", name)
				}
				ks.Close()
			}
		}
	}
}

func realStream(t testing.TB, name, uid string) ([]byte, *KeyedHandle) {
	sp, err := Open("testdata/probe-" + name)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range sp.Meta.Operators {
		if op.UID == uid {
			h := op.Subtasks[0].ManagedKeyed
			b, err := os.ReadFile(sp.Dir + "/" + h.Delegate.Path)
			if h.Delegate.Type == handleByteStream {
				b, err = h.Delegate.Data, nil
			}
			if err != nil {
				t.Fatal(err)
			}
			return b, h
		}
	}
	t.Fatalf("no operator %s", uid)
	return nil, nil
}

func TestTruncatedStream(t *testing.T) {
	for _, name := range []string{"heap-files", "heap-files-snappy"} {
		b, h := realStream(t, name, "long-agg")
		hdrEnd := h.Offsets[0]
		for n := int(hdrEnd) + 1; n < len(b); n += 3 {
			ks, err := openKeyedStream("test.bin", h, bytes.NewReader(b[:n]), int64(n))
			if err != nil {
				if !errors.Is(err, snapshotfmt.ErrCorrupt) {
					t.Fatalf("%s len %d: %v", name, n, err)
				}
				continue
			}
			err = ks.ForEach(func(int, Entry) error { return nil })
			if !errors.Is(err, snapshotfmt.ErrCorrupt) || !strings.Contains(err.Error(), "test.bin") || !strings.Contains(err.Error(), "key group") {
				t.Fatalf("%s truncated to %d: %v", name, n, err)
			}
		}
	}
}

func FuzzKeyedStream(f *testing.F) {
	for _, name := range []string{"heap-files", "heap-files-snappy", "rocksdb-files"} {
		b, h := realStream(f, name, "str-counter")
		f.Add(b, h.Offsets[0], h.Offsets[1], h.Offsets[3])
	}
	f.Fuzz(func(t *testing.T, b []byte, o1, o2, o3 int64) {
		h := &KeyedHandle{Offsets: []int64{o1, o2, 0, o3}}
		ks, err := openKeyedStream("fuzz", h, bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, snapshotfmt.ErrCorrupt) && !errors.Is(err, snapshotfmt.ErrUnsupported) && !errors.Is(err, snapshotfmt.ErrTooLarge) {
				t.Fatalf("unclassified: %v", err)
			}
			return
		}
		err = ks.ForEach(func(int, Entry) error { return nil })
		if err != nil && !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Fatalf("unclassified: %v", err)
		}
	})
}

func FuzzParseHeader(f *testing.F) {
	for _, name := range []string{"heap-files", "rocksdb-files"} {
		for _, uid := range []string{"str-counter", "long-agg"} {
			b, h := realStream(f, name, uid)
			f.Add(b[:h.Offsets[0]])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b, len(b))
		if err != nil {
			if !errors.Is(err, snapshotfmt.ErrCorrupt) && !errors.Is(err, snapshotfmt.ErrUnsupported) {
				t.Fatalf("unclassified: %v", err)
			}
			return
		}
		if h.Len != len(b) {
			t.Fatalf("len %d", h.Len)
		}
	})
}

// TestHeaderUnknownSnapshotBody: a serializer snapshot whose body this
// parser does not know (a POJO value) is delimited by backtracking, and
// the states after it still parse.
func TestHeaderUnknownSnapshotBody(t *testing.T) {
	b, h := realStream(t, "heap-files", "str-counter")
	hdr := b[:h.Offsets[0]]
	long := "org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"
	i := bytes.Index(hdr, []byte(long))
	if i < 0 {
		t.Fatal("no LongSerializer snapshot in header")
	}
	w := &jw{}
	w.b(hdr[:i-2]...)
	w.utf("com.example.MyPojoSerializerSnapshot").i32(5)
	w.utf("com.example.Event").i32(2).b(0x02, 0x41, 0x00)
	w.b(hdr[i+len(long)+4:]...)
	ph, err := ParseHeader(w.Bytes(), w.Len())
	if err != nil {
		t.Fatal(err)
	}
	if len(ph.States) != 3 || ph.States[0].Name != "count" || !ph.States[0].Serializers[0].Snapshot.Opaque || ph.States[2].Kind() != "TIMERS" {
		t.Fatalf("%+v %+v", ph.States[0], ph.States[0].Serializers[0].Snapshot)
	}
	// Cut inside the state list, the header no longer parses.
	if _, err := ParseHeader(w.Bytes()[:i], i); !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Fatalf("short header: %v", err)
	}
}
