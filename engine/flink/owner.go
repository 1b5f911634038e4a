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
	chunk    int // arena chunk size, from the budget

	// Buffered entries live in fixed-size chunks (no copying on growth,
	// exact accounting); rec.off is chunk<<32 | offset.
	chunks  [][]byte
	free    [][]byte // chunks kept for reuse after a spill
	recs    [][]rec  // blocks of recBlock records
	nrecs   int
	order   []int32 // grouping permutation, reused
	runs    []*run
	spilled int64
	spills  int // runs written (before merging)
	entries uint64
	handle  *KeyedHandle
}

const (
	maxChunk = 4 << 20
	minChunk = 64 << 10
	recBlock = 1 << 13
	// maxRuns bounds the runs merged at once (open files and read
	// buffers); more are first merged into one.
	maxRuns = 32
)

type run struct {
	path   string
	counts []int32 // entries per slot
}

func (o *owner) slots() int { return (o.hi - o.lo + 1) * o.nStates }

func (o *owner) slot(r *rec) int { return (int(r.kg)-o.lo)*o.nStates + int(r.state) }

func (o *owner) rec(i int) *rec { return &o.recs[i/recBlock][i%recBlock] }

// held is the memory the buffered entries take.
func (o *owner) held() int64 {
	var n int64
	for _, c := range o.chunks {
		n += int64(cap(c))
	}
	return n + int64(len(o.recs))*recBlock*recSize + int64(cap(o.order))*4
}

// place copies an entry's bytes into the arena and returns its offset.
func (o *owner) place(b []byte) int64 {
	n := len(o.chunks)
	if n == 0 || cap(o.chunks[n-1])-len(o.chunks[n-1]) < len(b) {
		var c []byte
		if o.chunk == 0 {
			o.chunk = int(min(max(o.budget/16, minChunk), maxChunk))
		}
		if len(o.free) > 0 && len(b) <= cap(o.free[len(o.free)-1]) {
			c, o.free = o.free[len(o.free)-1][:0], o.free[:len(o.free)-1]
		} else {
			c = make([]byte, 0, max(o.chunk, len(b)))
		}
		o.chunks = append(o.chunks, c)
		n++
	}
	c := o.chunks[n-1]
	off := int64(n-1)<<32 | int64(len(c))
	o.chunks[n-1] = append(c, b...)
	return off
}

func (o *owner) entry(r *rec) []byte {
	c := o.chunks[r.off>>32]
	off := r.off & (1<<32 - 1)
	return c[off : off+int64(r.klen)+int64(r.vlen)]
}

func (o *owner) collect(ch chan *batch) error {
	for b := range ch {
		for _, r := range b.recs {
			if int(r.kg) < o.lo || int(r.kg) > o.hi {
				return fmt.Errorf("internal error: key group %d routed to the owner of %d..%d", r.kg, o.lo, o.hi)
			}
			r.off = o.place(b.buf[r.off : r.off+int64(r.klen)+int64(r.vlen)])
			if o.nrecs%recBlock == 0 && o.nrecs/recBlock == len(o.recs) {
				o.recs = append(o.recs, make([]rec, recBlock))
			}
			*o.rec(o.nrecs) = r
			o.nrecs++
		}
		o.entries += uint64(len(b.recs))
		b.buf, b.recs = b.buf[:0], b.recs[:0]
		batchPool.Put(b)
		if o.held() >= o.budget {
			if err := o.spill(); err != nil {
				return err
			}
		}
	}
	return nil
}

// grouped orders the buffered entries by slot (stable counting sort) into
// o.order and returns the count of each slot.
func (o *owner) grouped() []int32 {
	counts := make([]int32, o.slots())
	for i := 0; i < o.nrecs; i++ {
		counts[o.slot(o.rec(i))]++
	}
	start := make([]int32, len(counts))
	var n int32
	for i, c := range counts {
		start[i] = n
		n += c
	}
	if cap(o.order) < o.nrecs {
		o.order = make([]int32, o.nrecs)
	}
	o.order = o.order[:o.nrecs]
	for i := 0; i < o.nrecs; i++ {
		s := o.slot(o.rec(i))
		o.order[start[s]] = int32(i)
		start[s]++
	}
	return counts
}

// reset drops the buffered entries, keeping chunks and blocks for reuse.
func (o *owner) reset() {
	o.free = append(o.free, o.chunks...)
	o.chunks = o.chunks[:0]
	o.nrecs = 0
}

func (o *owner) spill() error {
	if o.nrecs == 0 {
		return nil
	}
	counts := o.grouped()
	p := filepath.Join(o.spillDir, fsx.TempName(SpillPrefix))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	o.runs = append(o.runs, &run{path: p, counts: counts})
	o.spills++
	w := bufio.NewWriterSize(f, 256<<10)
	var hdr [8]byte
	for _, i := range o.order {
		r := o.rec(int(i))
		binary.BigEndian.PutUint32(hdr[:4], r.klen)
		binary.BigEndian.PutUint32(hdr[4:], r.vlen)
		w.Write(hdr[:])
		w.Write(o.entry(r))
		o.spilled += 8 + int64(r.klen) + int64(r.vlen)
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	o.reset()
	if len(o.runs) >= maxRuns {
		return o.compact()
	}
	return nil
}

// compact merges all runs into one, slot by slot; each run is read once,
// sequentially.
func (o *owner) compact() error {
	p := filepath.Join(o.spillDir, fsx.TempName(SpillPrefix))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	merged := &run{path: p, counts: make([]int32, o.slots())}
	w := bufio.NewWriterSize(f, 256<<10)
	err = func() error {
		readers := make([]*bufio.Reader, len(o.runs))
		for i, r := range o.runs {
			rf, err := os.Open(r.path)
			if err != nil {
				return err
			}
			defer rf.Close()
			readers[i] = bufio.NewReaderSize(rf, 64<<10)
		}
		var hdr [8]byte
		for slot := range merged.counts {
			for i, r := range o.runs {
				for c := r.counts[slot]; c > 0; c-- {
					if _, err := io.ReadFull(readers[i], hdr[:]); err != nil {
						return fmt.Errorf("read spill run: %w", err)
					}
					n := int64(binary.BigEndian.Uint32(hdr[:4])) + int64(binary.BigEndian.Uint32(hdr[4:]))
					w.Write(hdr[:])
					if _, err := io.CopyN(w, readers[i], n); err != nil {
						return fmt.Errorf("read spill run: %w", err)
					}
				}
				merged.counts[slot] += r.counts[slot]
			}
		}
		return w.Flush()
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p)
		return fmt.Errorf("merge spill runs: %w", err)
	}
	for _, r := range o.runs {
		os.Remove(r.path)
	}
	o.runs = []*run{merged}
	return nil
}

func (o *owner) cleanup() {
	for _, r := range o.runs {
		os.Remove(r.path)
	}
	o.runs = nil
	o.chunks, o.free, o.recs, o.order = nil, nil, nil, nil
}

// write merges runs and memory into the owner's file in dir.
func (o *owner) write(ctx context.Context, dir string, _ int, header []byte) error {
	counts := o.grouped()
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
				r := o.rec(int(o.order[mi]))
				mi++
				if err := start(); err != nil {
					return err
				}
				e := o.entry(r)
				if err := sw.Add(s, e[:r.klen], e[r.klen:]); err != nil {
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
