package flink

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rebucket/rebucket/internal/fsx"
)

// owner collects the entries of a contiguous key-group range [lo, hi] and
// writes them as one canonical keyed-state file. A canonical stream needs
// entries grouped by key group and, inside it, by state, in no particular
// order otherwise; so the owner groups (a counting sort over the
// (key group, state) slots) and never compares keys. When its memory share
// is full it writes the buffered entries as a run already grouped, with
// the entry count of every slot; writing merges the runs and the memory
// slot by slot, reading each run once, sequentially.
type owner struct {
	lo, hi   int
	nStates  int
	budget   int64
	spillDir string
	name     string

	arena   []byte
	recs    []rec
	runs    []*run
	spilled int64
	entries uint64
	handle  *KeyedHandle
}

type run struct {
	path   string
	counts []int32 // entries per slot
}

func (o *owner) slots() int { return (o.hi - o.lo + 1) * o.nStates }

func (o *owner) slot(r *rec) int { return (int(r.kg)-o.lo)*o.nStates + int(r.state) }

func (o *owner) collect(ch chan *batch) error {
	for b := range ch {
		base := int64(len(o.arena))
		o.arena = append(o.arena, b.buf...)
		for _, r := range b.recs {
			if int(r.kg) < o.lo || int(r.kg) > o.hi {
				return fmt.Errorf("internal error: key group %d routed to the owner of %d..%d", r.kg, o.lo, o.hi)
			}
			r.off += base
			o.recs = append(o.recs, r)
		}
		o.entries += uint64(len(b.recs))
		b.buf, b.recs = b.buf[:0], b.recs[:0]
		batchPool.Put(b)
		if int64(len(o.arena))+int64(len(o.recs))*recSize >= o.budget {
			if err := o.spill(); err != nil {
				return err
			}
		}
	}
	return nil
}

// grouped orders the buffered entries by slot (stable counting sort) and
// returns them with the count of each slot.
func (o *owner) grouped() ([]rec, []int32) {
	counts := make([]int32, o.slots())
	for i := range o.recs {
		counts[o.slot(&o.recs[i])]++
	}
	start := make([]int, len(counts))
	n := 0
	for i, c := range counts {
		start[i] = n
		n += int(c)
	}
	out := make([]rec, len(o.recs))
	for _, r := range o.recs {
		s := o.slot(&r)
		out[start[s]] = r
		start[s]++
	}
	return out, counts
}

func (o *owner) spill() error {
	if len(o.recs) == 0 {
		return nil
	}
	sorted, counts := o.grouped()
	p := filepath.Join(o.spillDir, fsx.TempName(".rebucket-flink-spill-"))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	o.runs = append(o.runs, &run{path: p, counts: counts})
	w := bufio.NewWriterSize(f, 256<<10)
	var hdr [8]byte
	for _, r := range sorted {
		binary.BigEndian.PutUint32(hdr[:4], r.klen)
		binary.BigEndian.PutUint32(hdr[4:], r.vlen)
		w.Write(hdr[:])
		w.Write(o.arena[r.off : r.off+int64(r.klen)+int64(r.vlen)])
		o.spilled += 8 + int64(r.klen) + int64(r.vlen)
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	o.arena, o.recs = o.arena[:0], o.recs[:0]
	return nil
}

func (o *owner) cleanup() {
	for _, r := range o.runs {
		os.Remove(r.path)
	}
	o.runs = nil
	o.arena, o.recs = nil, nil
}

// write merges runs and memory into the owner's file in dir.
func (o *owner) write(ctx context.Context, dir string, _ int, header []byte) error {
	sorted, counts := o.grouped()
	o.recs = nil
	type runReader struct {
		f *os.File
		r *bufio.Reader
	}
	readers := make([]runReader, len(o.runs))
	defer func() {
		for _, rr := range readers {
			if rr.f != nil {
				rr.f.Close()
			}
		}
	}()
	for i, r := range o.runs {
		f, err := os.Open(r.path)
		if err != nil {
			return err
		}
		readers[i] = runReader{f, bufio.NewReaderSize(f, 64<<10)}
	}
	p := filepath.Join(dir, o.name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	sw, err := NewStreamWriter(f, header, o.lo, o.hi-o.lo+1)
	if err != nil {
		return err
	}
	var kbuf []byte
	mi := 0
	for kg := o.lo; kg <= o.hi; kg++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		started := false
		start := func() error {
			if started {
				return nil
			}
			started = true
			return sw.StartKeyGroup(kg)
		}
		for s := 0; s < o.nStates; s++ {
			slot := (kg-o.lo)*o.nStates + s
			for i, r := range o.runs {
				for c := r.counts[slot]; c > 0; c-- {
					var hdr [8]byte
					if _, err := io.ReadFull(readers[i].r, hdr[:]); err != nil {
						return fmt.Errorf("read spill run: %w", err)
					}
					kl, vl := binary.BigEndian.Uint32(hdr[:4]), binary.BigEndian.Uint32(hdr[4:])
					if cap(kbuf) < int(kl+vl) {
						kbuf = make([]byte, kl+vl)
					}
					kbuf = kbuf[:kl+vl]
					if _, err := io.ReadFull(readers[i].r, kbuf); err != nil {
						return fmt.Errorf("read spill run: %w", err)
					}
					if err := start(); err != nil {
						return err
					}
					if err := sw.Add(s, kbuf[:kl], kbuf[kl:]); err != nil {
						return err
					}
				}
			}
			for c := counts[slot]; c > 0; c-- {
				r := sorted[mi]
				mi++
				if err := start(); err != nil {
					return err
				}
				k := o.arena[r.off : r.off+int64(r.klen)]
				if err := sw.Add(s, k, o.arena[r.off+int64(r.klen):r.off+int64(r.klen)+int64(r.vlen)]); err != nil {
					return err
				}
			}
		}
	}
	offsets, size, err := sw.Finish()
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	o.handle = &KeyedHandle{StartKeyGroup: int32(o.lo), Offsets: offsets, Delegate: &StreamHandle{Type: handleRelativeFile, Path: o.name, Size: size}}
	return nil
}
