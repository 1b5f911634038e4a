package flink

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestStreamWriterFramedReproducesFlink: writing the entries of every real
// uncompressed stream with AddFramed (the rewrite's path) reproduces
// Flink's file byte for byte, offsets included, as Add does.
func TestStreamWriterFramedReproducesFlink(t *testing.T) {
	n := 0
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
				for i, e := range entries {
					if e.kg != kg {
						if err := w.StartKeyGroup(e.kg); err != nil {
							t.Fatal(err)
						}
						kg = e.kg
					}
					last := i+1 == len(entries) || entries[i+1].kg != e.kg || entries[i+1].state != e.state
					f := binary.BigEndian.AppendUint32(nil, uint32(len(e.key)))
					f = append(f, e.key...)
					f = binary.BigEndian.AppendUint32(f, uint32(len(e.value)))
					f = append(f, e.value...)
					if err := w.AddFramed(e.state, f, last); err != nil {
						t.Fatal(err)
					}
				}
				offs, _, err := w.Finish()
				if err != nil {
					t.Fatal(err)
				}
				if !ks.Header.Compressed {
					orig := make([]byte, ks.Size)
					ks.r.ReadAt(orig, 0)
					if !bytes.Equal(orig, buf.Bytes()) || !slicesEqual(offs, h.Offsets) {
						t.Fatalf("%s %s subtask %d: framed rewrite differs from Flink's stream", name, op.UID, st.Index)
					}
					n++
				}
				ks.Close()
			}
		}
	}
	if n == 0 {
		t.Fatal("no uncompressed stream compared")
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStreamWriterFramedMisuse: AddFramed refuses bad framing, a flagged
// prefix, a second run of a state and a section whose run is not ended.
func TestStreamWriterFramedMisuse(t *testing.T) {
	hdr := []byte{0, 0, 0, 6, 0}
	ent := func(key, val string) []byte {
		f := binary.BigEndian.AppendUint32(nil, uint32(len(key)))
		f = append(f, key...)
		f = binary.BigEndian.AppendUint32(f, uint32(len(val)))
		return append(f, val...)
	}
	for name, fn := range map[string]func(w *StreamWriter) error{
		"short":      func(w *StreamWriter) error { return w.AddFramed(0, []byte{0, 0, 0, 1, 0}, true) },
		"bad length": func(w *StreamWriter) error { e := ent("\x01k", "v"); e[3] = 9; return w.AddFramed(0, e, true) },
		"flagged":    func(w *StreamWriter) error { return w.AddFramed(0, ent("\x81k", "v"), true) },
		"two runs": func(w *StreamWriter) error {
			w.AddFramed(0, ent("\x01a", "v"), true)
			return w.AddFramed(0, ent("\x01b", "v"), true)
		},
		"open run": func(w *StreamWriter) error {
			w.AddFramed(0, ent("\x01a", "v"), false)
			return w.AddFramed(1, ent("\x01b", "v"), true)
		},
		"open section": func(w *StreamWriter) error {
			w.AddFramed(0, ent("\x01a", "v"), false)
			_, _, err := w.Finish()
			return err
		},
		"mixed": func(w *StreamWriter) error {
			w.Add(0, []byte("\x01a"), nil)
			return w.AddFramed(0, ent("\x01b", "v"), true)
		},
	} {
		w, err := NewStreamWriter(&bytes.Buffer{}, hdr, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.StartKeyGroup(1); err != nil {
			t.Fatal(err)
		}
		if err := fn(w); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestRewriteSelfCheckCatchesDamage: the self-check no longer rehashes
// keys, so prove it still refuses to publish an output whose entries
// differ from what routing computed: a value byte changed (fingerprints),
// a prefix changed (prefix against section and fingerprints).
func TestRewriteSelfCheckCatchesDamage(t *testing.T) {
	defer func() { testDamageEntry = nil }()
	for name, damage := range map[string]func(e []byte){
		"value":  func(e []byte) { e[len(e)-1] ^= 1 },
		"prefix": func(e []byte) { e[4] = (e[4] + 1) % 128 },
	} {
		for _, src := range []string{"testdata/probe-heap-files", "testdata/probe-heap-files-snappy"} {
			var done atomic.Bool // owners write concurrently
			testDamageEntry = func(e []byte) {
				if len(e) > 9 && done.CompareAndSwap(false, true) {
					damage(e)
				}
			}
			dir := t.TempDir()
			dst := filepath.Join(dir, "out")
			_, err := Rewrite(context.Background(), src, dst, RewriteOptions{MaxParallelism: 128, Parallelism: 2})
			if !done.Load() {
				t.Fatalf("%s %s: nothing damaged", name, src)
			}
			if err == nil || !strings.Contains(err.Error(), "self-verification") {
				t.Fatalf("%s %s: damaged output not refused: %v", name, src, err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("%s %s: left %v behind", name, src, ents)
			}
		}
	}
}

// BenchmarkOwnerWrite groups and writes 2.5M buffered entries (spread
// over 64 key groups and 5 states in arrival order, as one of two owners
// of a 1M-key rewrite holds them) into one keyed-state file.
func BenchmarkOwnerWrite(b *testing.B) {
	const n = 2500000
	hdr, err := os.ReadFile("gentemplate/str-counter.header")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	var cpu time.Duration
	defer func() { b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op") }()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		o := &owner{lo: 0, hi: 63, nStates: 5, budget: 1 << 40, spillDir: dir, name: "f" + strconv.Itoa(i)}
		ch := make(chan *batch, 1)
		go func() {
			var bt *batch
			x := uint32(1)
			for j := 0; j < n; j++ {
				if bt == nil {
					bt = &batch{buf: getBuf()}
				}
				x = x*1664525 + 1013904223
				kg := int(x>>8) % 64
				key := fmt.Sprintf("k%d", j)
				off := len(bt.buf)
				bt.buf = binary.BigEndian.AppendUint32(bt.buf, uint32(1+len(key)))
				bt.buf = append(bt.buf, byte(kg))
				bt.buf = append(bt.buf, key...)
				bt.buf = binary.BigEndian.AppendUint32(bt.buf, 8)
				bt.buf = append(bt.buf, "12345678"...)
				bt.recs = append(bt.recs, rec{kg: int32(kg), state: int32(x>>20) % 5, off: uint64(off)})
				if len(bt.buf) > batchBytes-64 {
					ch <- bt
					bt = nil
				}
			}
			if bt != nil {
				ch <- bt
			}
			close(ch)
		}()
		if err := o.collect(ch); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c0 := cpuTime()
		if err := o.write(context.Background(), dir, 0, hdr); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
		b.StopTimer()
		o.cleanup()
		os.Remove(filepath.Join(dir, o.name))
		b.StartTimer()
	}
}

// cpuTime is the process's user and system CPU time: the machine is
// shared, so benchmarks report CPU seconds beside wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReadSection reads every entry of a generated 200,000-key
// savepoint (1M entries), the loop under both the routing scan and the
// self-check.
func BenchmarkReadSection(b *testing.B) {
	src := filepath.Join(b.TempDir(), "src")
	if err := Generate(src, GenerateOptions{Keys: 200000}); err != nil {
		b.Fatal(err)
	}
	sp, err := Open(src)
	if err != nil {
		b.Fatal(err)
	}
	ops, err := sp.openKeyedOps()
	if err != nil {
		b.Fatal(err)
	}
	rd := &sectionReader{}
	b.ResetTimer()
	c0 := cpuTime()
	var n int
	for i := 0; i < b.N; i++ {
		for _, k := range ops {
			for _, s := range k.streams {
				for _, sec := range s.Sections() {
					if _, err := s.ReadSection(sec, rd, func(e Entry) error { n += len(e.Value); return nil }); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	b.ReportMetric((cpuTime()-c0).Seconds()/float64(b.N), "cpu-s/op")
}

// TestStreamWriterFramedRun: a run written page by page with AddFramedRun
// is the same stream as its entries written one by one with AddFramed.
func TestStreamWriterFramedRun(t *testing.T) {
	hdr := []byte{0, 0, 0, 6, 0}
	var pages [][]byte
	var all [][]byte
	lastOff := 0
	for p := 0; p < 3; p++ {
		var pg []byte
		for i := 0; i < 4; i++ {
			e := binary.BigEndian.AppendUint32(nil, 3)
			e = append(e, 5, 'k', byte('a'+p*4+i))
			e = binary.BigEndian.AppendUint32(e, 2)
			e = append(e, 'v', byte(i))
			lastOff = len(pg)
			pg = append(pg, e...)
			all = append(all, bytes.Clone(e))
		}
		pages = append(pages, pg)
	}
	var a, b bytes.Buffer
	wa, _ := NewStreamWriter(&a, hdr, 5, 1)
	wb, _ := NewStreamWriter(&b, hdr, 5, 1)
	wa.StartKeyGroup(5)
	wb.StartKeyGroup(5)
	for i, e := range all {
		if err := wa.AddFramed(2, e, i == len(all)-1); err != nil {
			t.Fatal(err)
		}
	}
	for i, pg := range pages {
		if err := wb.AddFramedRun(2, pg, i == len(pages)-1, lastOff); err != nil {
			t.Fatal(err)
		}
	}
	oa, _, err := wa.Finish()
	if err != nil {
		t.Fatal(err)
	}
	ob, _, err := wb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) || !slicesEqual(oa, ob) {
		t.Fatalf("AddFramedRun wrote\n%x\nAddFramed wrote\n%x", b.Bytes(), a.Bytes())
	}
	w, _ := NewStreamWriter(&bytes.Buffer{}, hdr, 5, 1)
	w.StartKeyGroup(5)
	if err := w.AddFramedRun(2, pages[0], true, 3); err == nil {
		t.Fatal("a last offset inside an entry was accepted")
	}
}
