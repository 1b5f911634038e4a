package flink

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// jw builds byte vectors the way java.io.DataOutputStream writes them,
// independently of enc, so layout tests do not check the encoder against
// itself.
type jw struct{ bytes.Buffer }

func (w *jw) b(v ...byte) *jw { w.Write(v); return w }
func (w *jw) i16(v int) *jw {
	w.Write(binary.BigEndian.AppendUint16(nil, uint16(v)))
	return w
}
func (w *jw) i32(v int64) *jw {
	w.Write(binary.BigEndian.AppendUint32(nil, uint32(v)))
	return w
}
func (w *jw) i64(v int64) *jw {
	w.Write(binary.BigEndian.AppendUint64(nil, uint64(v)))
	return w
}
func (w *jw) utf(s string) *jw { w.i16(len(s)); w.WriteString(s); return w }

// sampleMetadata is a version-6 _metadata written field by field after
// MetadataV6Serializer: one master state, a stateless operator, a keyed
// operator with a relative-file type-7 handle and an inline one, a source
// with inline operator state, a finished subtask, a fully finished
// operator, and trailing CheckpointProperties bytes.
func sampleMetadata(version int) []byte {
	w := &jw{}
	w.i32(0x4960672d).i32(int64(version)).i64(7)
	// master states
	w.i32(1)
	inner := &jw{}
	inner.i32(1).utf("hook").i32(3).b(9, 8, 7)
	w.i32(0xc96b1696).i32(int64(inner.Len())).b(inner.Bytes()...)
	w.i32(4)
	op := func(name, uid, id string, p, maxP int64) {
		if version >= 5 {
			w.utf(name).utf(uid)
		}
		raw, _ := hex.DecodeString(id)
		w.b(raw...).i32(p).i32(maxP)
	}
	// stateless sink: no coordinator, two subtasks without state
	op("sink", "sink-long", "b3b8c0627d20aff1d04ce16bbacba297", 2, 8)
	w.b(0).i32(2)
	for i := 0; i < 2; i++ {
		w.i32(int64(i)).i32(0).i32(0).b(0).b(0).i32(0).i32(0)
	}
	// keyed operator: subtask 0 relative file, subtask 1 inline managed
	// keyed state and an absolute-file raw keyed state
	op("long-agg", "long-agg", "38fd583b65762743c297614814766efc", 2, 8)
	w.b(0).i32(2)
	w.i32(0).i32(0).i32(0)
	w.b(7).i32(0).i32(4).i64(1578).i64(72256).i64(0).i64(210308)
	w.b(6).utf("0ae5c4d6-aaaa").i64(278858)
	w.b(0).i32(0).i32(0)
	w.i32(1).i32(0).i32(0)
	w.b(7).i32(4).i32(4).i64(10).i64(0).i64(20).i64(30)
	w.b(1).utf("inline-handle").i32(5).b(1, 2, 3, 4, 5)
	w.b(7).i32(4).i32(1).i64(0)
	w.b(2).i64(3).utf("file:/tmp/x")
	w.i32(0).i32(0)
	// source: coordinator state, operator state, one finished subtask
	op("Source: src", "src", "f362c87ffabe89c8a91fa7d0a523ba6c", 2, 8)
	w.b(1).utf("coord").i32(2).b(0xAB, 0xCD)
	w.i32(2)
	w.i32(0)
	w.i32(1).b(4).i32(2).utf("offset").b(0).i32(1).i64(189).utf("u").b(1).i32(0)
	w.b(1).utf("opstate").i32(3).b(5, 6, 7)
	w.i32(0).b(0).b(0).i32(0).i32(0)
	w.i32(-2) // subtask 1 finished
	// fully finished operator
	op("done", "", "00000000000000000000000000000001", 1, 8)
	w.b(0).i32(-1)
	if version >= 4 {
		w.b(0xac, 0xed, 0x00, 0x05, 0x73, 0x72)
	}
	return w.Bytes()
}

func TestMetadataDecodeLayout(t *testing.T) {
	for _, v := range []int{3, 4, 5, 6} {
		b := sampleMetadata(v)
		md, err := DecodeMetadata(b)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if md.Version != int32(v) || md.CheckpointID != 7 || len(md.MasterStates) != 1 || md.MasterStates[0].Name != "hook" || !bytes.Equal(md.MasterStates[0].Data, []byte{9, 8, 7}) {
			t.Fatalf("v%d header: %+v", v, md)
		}
		if len(md.Operators) != 4 {
			t.Fatalf("v%d: %d operators", v, len(md.Operators))
		}
		agg := md.Operators[1]
		if agg.IDString() != "38fd583b65762743c297614814766efc" || agg.MaxParallelism != 8 || agg.Parallelism != 2 {
			t.Fatalf("v%d agg: %+v", v, agg)
		}
		if v >= 5 && (agg.UID != "long-agg" || md.Operators[0].UID != "sink-long") {
			t.Fatalf("v%d uid %q", v, agg.UID)
		}
		k := agg.Subtasks[0].ManagedKeyed
		if k == nil || k.StartKeyGroup != 0 || k.EndKeyGroup() != 3 || k.Offsets[1] != 72256 || k.Delegate.Type != 6 || k.Delegate.Path != "0ae5c4d6-aaaa" || k.Delegate.Size != 278858 {
			t.Fatalf("v%d keyed handle: %+v %+v", v, k, k.Delegate)
		}
		k1 := agg.Subtasks[1].ManagedKeyed
		if k1.StartKeyGroup != 4 || !bytes.Equal(k1.Delegate.Data, []byte{1, 2, 3, 4, 5}) || k1.Delegate.Name != "inline-handle" {
			t.Fatalf("v%d inline keyed: %+v", v, k1)
		}
		if r := agg.Subtasks[1].RawKeyed; r == nil || r.Delegate.Type != 2 || r.Delegate.Path != "file:/tmp/x" || r.Delegate.Size != 3 {
			t.Fatalf("v%d raw keyed: %+v", v, r)
		}
		src := md.Operators[2]
		if src.Coordinator == nil || !bytes.Equal(src.Coordinator.Data, []byte{0xAB, 0xCD}) {
			t.Fatalf("v%d coordinator %+v", v, src.Coordinator)
		}
		os := src.Subtasks[0].ManagedOperator
		if os == nil || len(os.States) != 2 || os.States[0].Name != "offset" || os.States[0].Offsets[0] != 189 || os.States[1].ModeName() != "UNION" {
			t.Fatalf("v%d operator state %+v", v, os)
		}
		if !src.Subtasks[1].Finished || src.Subtasks[1].Index != 1 {
			t.Fatalf("v%d finished subtask %+v", v, src.Subtasks[1])
		}
		if !md.Operators[3].FullyFinished {
			t.Fatalf("v%d fully finished", v)
		}
		if v >= 4 && !bytes.Equal(md.Trailing, []byte{0xac, 0xed, 0x00, 0x05, 0x73, 0x72}) {
			t.Fatalf("v%d trailing %x", v, md.Trailing)
		}
		out, err := md.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("v%d: encode does not reproduce the input", v)
		}
	}
}

func TestMetadataRefusesNative(t *testing.T) {
	for _, typ := range []byte{3, 5, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17} {
		w := &jw{}
		w.i32(0x4960672d).i32(6).i64(1).i32(0).i32(1)
		w.utf("op").utf("uid").i64(1).i64(2).i32(1).i32(8).b(0).i32(1)
		w.i32(0).i32(0).i32(0).b(typ).i32(0).i32(1).i64(0)
		_, err := DecodeMetadata(w.Bytes())
		if !errors.Is(err, ErrNative) || !errors.Is(err, snapshotfmt.ErrUnsupported) {
			t.Fatalf("type %d: %v", typ, err)
		}
		if !strings.Contains(err.Error(), "flink stop --type canonical") {
			t.Fatalf("type %d: message lacks the advice: %v", typ, err)
		}
	}
}

func TestMetadataCorrupt(t *testing.T) {
	b := sampleMetadata(6)
	bad := [][]byte{
		nil, b[:7], append([]byte{0, 0, 0, 0}, b[4:]...),
	}
	for n := 8; n < len(b)-6; n += 7 {
		bad = append(bad, b[:n])
	}
	for i, c := range bad {
		_, err := DecodeMetadata(c)
		if !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Fatalf("case %d (%d bytes): %v", i, len(c), err)
		}
	}
	v := append([]byte(nil), b...)
	binary.BigEndian.PutUint32(v[4:], 2)
	if _, err := DecodeMetadata(v); !errors.Is(err, snapshotfmt.ErrUnsupported) {
		t.Fatalf("version 2: %v", err)
	}
}

func TestJavaUTF(t *testing.T) {
	for _, s := range []string{"", "abc", "été", "a\x00b", "😀x", "日本"} {
		m := JavaUTF(s)
		if JavaString(m) != s {
			t.Fatalf("%q -> %x -> %q", s, m, JavaString(m))
		}
	}
	if JavaUTF("\x00") != "\xc0\x80" || len(JavaUTF("😀")) != 6 {
		t.Fatalf("modified UTF-8: %x %x", JavaUTF("\x00"), JavaUTF("😀"))
	}
}

func FuzzDecodeMetadata(f *testing.F) {
	for _, v := range []int{3, 4, 5, 6} {
		f.Add(sampleMetadata(v))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		md, err := DecodeMetadata(b)
		if err != nil {
			if !errors.Is(err, snapshotfmt.ErrCorrupt) && !errors.Is(err, snapshotfmt.ErrUnsupported) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		out, err := md.Encode()
		if err != nil {
			return // e.g. a channel kind the encoder will not write back
		}
		// Bytes Flink never writes (a presence flag of 2, a present
		// operator-state flag followed by a null handle) normalise; what
		// the encoder writes must then be a fixed point.
		md2, err := DecodeMetadata(out)
		if err != nil {
			t.Fatalf("re-decode of encoded metadata: %v", err)
		}
		out2, err := md2.Encode()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("encode is not a fixed point: %v", err)
		}
	})
}
