package flink

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

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

	// Buffered entries stay in the scanners' batch buffers, taken over
	// whole (no copy; exact accounting); rec.off is chunk<<32 | offset.
	chunks     [][]byte
	chunkBytes int64   // capacity of chunks
	recs       [][]rec // blocks of recBlock records
	nrecs      int
	order      []uint64 // arena positions in slot order, reused
	runs       []*run
	spilled    int64
	spills     int // runs written (before merging)
	entries    uint64
	handle     *KeyedHandle
}

const (
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
	return o.chunkBytes + int64(len(o.recs))*recBlock*recSize + int64(cap(o.order))*8
}

// entry returns the framed entry at arena position p (chunk<<32 | offset).
func (o *owner) entry(p uint64) []byte {
	b := o.chunks[p>>32][p&(1<<32-1):]
	kl := binary.BigEndian.Uint32(b)
	n := 8 + kl + binary.BigEndian.Uint32(b[4+kl:])
	return b[:n:n]
}

// keyLen reads the key length of the entry at p.
func (o *owner) keyLen(p uint64) uint32 {
	return binary.BigEndian.Uint32(o.chunks[p>>32][p&(1<<32-1):])
}

// entryKL is entry when the key length is known.
func (o *owner) entryKL(p uint64, kl uint32) []byte {
	b := o.chunks[p>>32][p&(1<<32-1):]
	n := 8 + kl + binary.BigEndian.Uint32(b[4+kl:])
	return b[:n:n]
}

// testDamageEntry, set by tests only, alters framed entries as they are
// written, to prove the self-check catches what it must.
var testDamageEntry func(e []byte)

// gatherGroup is how many entries owner.write loads ahead.
const gatherGroup = 64

// collect takes over the batches routed to this owner: their buffers
// become arena chunks as they are.
func (o *owner) collect(ch chan *batch) error {
	for b := range ch {
		ci := int64(len(o.chunks))
		o.chunks = append(o.chunks, b.buf)
		o.chunkBytes += int64(cap(b.buf))
		for _, r := range b.recs {
			if int(r.kg) < o.lo || int(r.kg) > o.hi {
				return fmt.Errorf("internal error: key group %d routed to the owner of %d..%d", r.kg, o.lo, o.hi)
			}
			r.off |= uint64(ci) << 32
			if o.nrecs%recBlock == 0 && o.nrecs/recBlock == len(o.recs) {
				o.recs = append(o.recs, make([]rec, recBlock))
			}
			*o.rec(o.nrecs) = r
			o.nrecs++
		}
		o.entries += uint64(len(b.recs))
		b.buf, b.recs = nil, b.recs[:0]
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
		o.order = make([]uint64, o.nrecs)
	}
	o.order = o.order[:o.nrecs]
	for i := 0; i < o.nrecs; i++ {
		r := o.rec(i)
		s := o.slot(r)
		o.order[start[s]] = r.off
		start[s]++
	}
	return counts
}

// reset drops the buffered entries, handing the chunks back to the
// scanners and keeping the record blocks.
func (o *owner) reset() {
	for i, c := range o.chunks {
		putBuf(c)
		o.chunks[i] = nil
	}
	o.chunks = o.chunks[:0]
	o.chunkBytes = 0
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
	// A run holds the framed entries (as in the stream, no flags) in slot
	// order.
	w := bufio.NewWriterSize(f, 256<<10)
	for _, p := range o.order {
		e := o.entry(p)
		w.Write(e)
		o.spilled += int64(len(e))
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
		var buf []byte
		for slot := range merged.counts {
			for i, r := range o.runs {
				for c := r.counts[slot]; c > 0; c-- {
					var err error
					if buf, err = readFramed(readers[i], buf); err != nil {
						return err
					}
					w.Write(buf)
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
	o.reset()
	o.chunks, o.recs, o.order = nil, nil, nil
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
		for s := 0; s < o.nStates; s++ {
			slot := (kg-o.lo)*o.nStates + s
			left := int(counts[slot])
			for _, r := range o.runs {
				left += int(r.counts[slot])
			}
			if left == 0 {
				continue
			}
			if !started {
				if err := sw.StartKeyGroup(kg); err != nil {
					return err
				}
				started = true
			}
			for i, r := range o.runs {
				for c := r.counts[slot]; c > 0; c-- {
					var err error
					if kbuf, err = readFramed(readers[i].r, kbuf); err != nil {
						return err
					}
					left--
					if err := sw.AddFramed(s, kbuf, left == 0); err != nil {
						return err
					}
				}
			}
			// Entries sit in arrival order, so each is a cache miss: load
			// the lengths of a group first (independent loads, whose misses
			// overlap), then write the group.
			for n := int(counts[slot]); n > 0; {
				g := min(n, gatherGroup)
				var kl [gatherGroup]uint32
				for j := range g {
					kl[j] = o.keyLen(o.order[mi+j])
				}
				for j := range g {
					left--
					e := o.entryKL(o.order[mi+j], kl[j])
					if testDamageEntry != nil {
						testDamageEntry(e)
					}
					if err := sw.AddFramed(s, e, left == 0); err != nil {
						return err
					}
				}
				mi += g
				n -= g
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

// readFramed reads one framed entry (i32 keyLen, key, i32 valueLen,
// value) of a spill run into buf.
func readFramed(r *bufio.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for part := 0; part < 2; part++ {
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return buf, fmt.Errorf("read spill run: %w", err)
		}
		n := int(binary.BigEndian.Uint32(l[:]))
		buf = append(buf, l[:]...)
		if cap(buf)-len(buf) < n {
			buf = slices.Grow(buf, n)
		}
		at := len(buf)
		buf = buf[:at+n]
		if _, err := io.ReadFull(r, buf[at:]); err != nil {
			return buf, fmt.Errorf("read spill run: %w", err)
		}
	}
	return buf, nil
}
